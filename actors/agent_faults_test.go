package actors_test

import (
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/testkit"
)

func TestAgentCluster_WorkerKilled_pendingUndeliverableKeysMove(t *testing.T) {
	knobs := peerConfig{HealthMS: 200, Threshold: 2, RPCMS: 5000}
	n1, n2, n3 := knobs, knobs, knobs
	n1.ID = "n1"
	n2.ID, n2.Types, n2.TestTypes = "n2", []string{"counter"}, []string{"hang"}
	n3.ID, n3.Types = "n3", []string{"counter"}
	c := startPeerCluster(t, n1, n2, n3)
	router, victim, survivor := c.peers[0], c.peers[1], c.peers[2]
	ks := keys("k", 40)
	before := owners(t, must(t, router.call(peerRequest{Op: "sendkeys", Type: "counter", Keys: ks, Tenant: "acme"})), ks)
	var moved []string
	for k, w := range before {
		if w == victim.member {
			moved = append(moved, k)
		}
	}
	if len(moved) == 0 || len(moved) == len(ks) {
		t.Fatalf("%d of %d keys on the victim: placement does not shard", len(moved), len(ks))
	}

	// Sessions pending on the victim: its hang agents hold them until their 20 s deadline.
	var pending []<-chan peerReply
	for _, k := range keys("h", 10) {
		pending = append(pending, router.start(peerRequest{Op: "send", Type: "hang", Key: k, Tenant: "acme", TimeoutMS: 20000}))
	}
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
		for _, w := range must(t, victim.call(peerRequest{Op: "directory"})).Directory.Workers {
			if w.Self {
				return w.ActiveAgents >= 10
			}
		}
		return false
	}, "the victim runs the 10 hanging agents")

	killed := time.Now()
	c.kill(victim)
	for _, ch := range pending {
		o := must(t, router.await(ch)).Outcome
		if o.Status != "undeliverable" || agents.ReasonCode(o.Reason) != agents.ReasonWorkerEvicted {
			t.Fatalf("pending send on the killed worker: %+v, want undeliverable worker-evicted", o)
		}
	}
	resolved := time.Since(killed)
	t.Logf("10 pending sessions resolved undeliverable %v after the kill (probe bound %v)", resolved,
		agents.Config{HealthInterval: 200 * time.Millisecond, FailureThreshold: 2}.EvictionBound())
	if resolved > 5*time.Second {
		t.Fatalf("pending sessions resolved after %v", resolved)
	}

	// The victim's keys moved to the survivor; every key is served again.
	testkit.EventuallyErr(t, 10*time.Second, func() error {
		r := must(t, router.call(peerRequest{Op: "sendkeys", Type: "counter", Keys: ks, Tenant: "acme"}))
		for i, o := range r.Outcomes {
			if o.Status != "delivered" || o.Worker != survivor.member {
				return errorf("key %s: %+v", ks[i], o)
			}
		}
		return nil
	})
}

func TestAgentCluster_RouterKilled_sendsResumeThroughAnotherNode(t *testing.T) {
	knobs := peerConfig{Types: []string{"counter"}, HealthMS: 200, Threshold: 2, RPCMS: 5000}
	n1, n2, n3 := knobs, knobs, knobs
	n1.ID, n2.ID, n3.ID = "n1", "n2", "n3"
	c := startPeerCluster(t, n1, n2, n3)
	first, next := c.peers[0], c.peers[1]
	ks := keys("k", 30)
	routed := owners(t, must(t, first.call(peerRequest{Op: "sendkeys", Type: "counter", Keys: ks, Tenant: "acme"})), ks)
	onRouter := 0
	for _, w := range routed {
		if w == first.member {
			onRouter++
		}
	}
	if onRouter == 0 {
		t.Fatal("no key on the routing node: the test would not move any")
	}
	c.kill(first)
	killed := time.Now()
	testkit.EventuallyErr(t, 10*time.Second, func() error {
		r := must(t, next.call(peerRequest{Op: "sendkeys", Type: "counter", Keys: ks, Tenant: "acme", TimeoutMS: 2000}))
		for i, o := range r.Outcomes {
			if o.Status != "delivered" || o.Worker == first.member {
				return errorf("key %s: %+v", ks[i], o)
			}
		}
		return nil
	})
	t.Logf("all %d keys (%d on the killed router) served through another node %v after the kill", len(ks), onRouter, time.Since(killed))
}

func TestAgentCluster_Eviction_byFailedHealthProbes(t *testing.T) {
	// LAN membership detects the pause after 5–6 s; the probes (every 100 ms, threshold 2) much
	// sooner, so the eviction observed is theirs.
	knobs := peerConfig{HealthMS: 100, Threshold: 2, RPCMS: 1000, Profile: "lan"}
	n1, n2 := knobs, knobs
	n1.ID = "n1"
	n2.ID, n2.Types = "n2", []string{"counter"}
	c := startPeerCluster(t, n1, n2)
	router, worker := c.peers[0], c.peers[1]
	if o := must(t, router.call(peerRequest{Op: "send", Type: "counter", Key: "k", Tenant: "acme"})).Outcome; o.Status != "delivered" {
		t.Fatalf("before the pause: %+v", o)
	}
	worker.pause()
	paused := time.Now()
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
		for _, w := range must(t, router.call(peerRequest{Op: "directory"})).Directory.Workers {
			if w.ID == worker.member {
				return w.Evicted
			}
		}
		t.Fatal("the paused worker left the directory before its probes evicted it")
		return false
	}, "the paused worker is evicted by its failed probes")
	t.Logf("evicted %v after the pause (bound %v)", time.Since(paused),
		agents.Config{HealthInterval: 100 * time.Millisecond, FailureThreshold: 2}.EvictionBound())
	o := must(t, router.call(peerRequest{Op: "send", Type: "counter", Key: "k", Tenant: "acme"})).Outcome
	if o.Status != "undeliverable" || agents.ReasonCode(o.Reason) != agents.ReasonNoLiveOwner {
		t.Fatalf("send to the evicted worker's type: %+v, want undeliverable no-live-owner", o)
	}
	worker.resume()
	// Answering probes again re-registers it.
	testkit.EventuallyErr(t, 5*time.Second, func() error {
		o := must(t, router.call(peerRequest{Op: "send", Type: "counter", Key: "k", Tenant: "acme"})).Outcome
		if o.Status != "delivered" || o.Response != `{"count":2}` {
			return errorf("after resume: %+v", o)
		}
		return nil
	})
}

func TestAgentCluster_Stop_orderedLosesNothingAcknowledged(t *testing.T) {
	c := startPeerCluster(t,
		peerConfig{ID: "n1"},
		peerConfig{ID: "n2", TestTypes: []string{"tally", "tally2"}})
	router, worker := c.peers[0], c.peers[1]
	var subs []*peerSub
	for _, k := range keys("e", 20) {
		subs = append(subs, &peerSub{Tenant: "acme", Topic: "ev", Type: "tally", Key: k})
	}
	must(t, router.call(peerRequest{Op: "subscribe", Subs: subs}))
	pubs := router.start(peerRequest{Op: "publishmany", Topic: "ev", Tenant: "acme", N: 400})
	sends := router.start(peerRequest{Op: "sendmany", Type: "tally2", Key: "direct", Tenant: "acme", N: 400, TimeoutMS: 5000})
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		r := must(t, worker.call(peerRequest{Op: "tally"}))
		return r.Tally > 0 && r.Tally2 > 0
	}, "traffic reaches the worker")
	stopped := must(t, worker.call(peerRequest{Op: "stop", TimeoutMS: 10000}))
	c.dead[worker] = true
	published := must(t, router.await(pubs)).Deliveries
	sent := must(t, router.await(sends))
	delivered := 0
	for _, o := range sent.Outcomes {
		switch {
		case o.Status == "delivered":
			delivered++
		case o.Status != "undeliverable":
			t.Fatalf("send during the stop: %+v (want delivered or undeliverable)", o)
		}
	}
	t.Logf("acknowledged: %d publish deliveries, %d sends; handled by the stopped worker: %d, %d",
		published, delivered, stopped.Tally, stopped.Tally2)
	if published == 0 || delivered == 0 {
		t.Fatal("no traffic was acknowledged before the stop")
	}
	if int64(published) > stopped.Tally || int64(delivered) > stopped.Tally2 {
		t.Fatalf("acknowledged %d deliveries and %d sends, handled only %d and %d", published, delivered, stopped.Tally, stopped.Tally2)
	}
}

// TestAgentCluster_KeyMovesBack_startsWithNoState: a key that moved to an owner that joined,
// and back when that owner was killed, starts over on its first owner: the state that owner
// kept missed what the other handled (docs: a moved key starts with no state).
func TestAgentCluster_KeyMovesBack_startsWithNoState(t *testing.T) {
	knobs := peerConfig{HealthMS: 200, Threshold: 2, RPCMS: 5000}
	n1, n2, n3 := knobs, knobs, knobs
	n1.ID = "n1"
	n2.ID, n2.Types = "n2", []string{"counter"}
	n3.ID, n3.Types = "n3", []string{"counter"}
	c := startPeerCluster(t, n1, n2)
	router, first := c.peers[0], c.peers[1]
	ks := keys("m", 30)
	counts := func() (map[string]string, map[string]string) {
		t.Helper()
		r := must(t, router.call(peerRequest{Op: "sendkeys", Type: "counter", Keys: ks, Tenant: "acme"}))
		owner, count := map[string]string{}, map[string]string{}
		for i, o := range r.Outcomes {
			if o.Status != "delivered" {
				t.Fatalf("key %s: %+v", ks[i], o)
			}
			owner[ks[i]], count[ks[i]] = o.Worker, o.Response
		}
		return owner, count
	}
	counts()
	counts() // every key counts 2 on the first owner

	n3.Seed = router.addr
	second := startAgentPeer(t, n3)
	c.peers = append(c.peers, second)
	c.waitConverged()
	owner, count := counts()
	var moved []string
	for _, k := range ks {
		if owner[k] == second.member {
			moved = append(moved, k)
			if count[k] != `{"count":1}` {
				t.Fatalf("key %s on the joined owner answered %s, want a count of 1", k, count[k])
			}
		}
	}
	if len(moved) == 0 || len(moved) == len(ks) {
		t.Fatalf("%d of %d keys moved to the joined owner", len(moved), len(ks))
	}

	c.kill(second)
	testkit.EventuallyErr(t, 10*time.Second, func() error {
		d := must(t, router.call(peerRequest{Op: "directory"})).Directory
		for _, w := range d.Workers {
			if w.ID == second.member && !w.Evicted {
				return errorf("the killed owner is still listed: %+v", w)
			}
		}
		return nil
	})
	owner, count = counts()
	for _, k := range moved {
		if owner[k] != first.member || count[k] != `{"count":1}` {
			t.Fatalf("key %s back on %s answered %s, want a count of 1 on %s", k, owner[k], count[k], first.member)
		}
	}
}
