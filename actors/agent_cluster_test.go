package actors_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/testkit"
)

// peerCluster is a cluster of peer processes (agent_peer_test.go), the first one the seed.
type peerCluster struct {
	t     *testing.T
	peers []*agentPeer
	dead  map[*agentPeer]bool
}

// startPeerCluster starts the peers in order, each joining the first, and waits until every
// router lists every worker with its types.
func startPeerCluster(t *testing.T, cfgs ...peerConfig) *peerCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts node processes")
	}
	c := &peerCluster{t: t, dead: map[*agentPeer]bool{}}
	for i, cfg := range cfgs {
		if i > 0 {
			cfg.Seed = c.peers[0].addr
		}
		c.peers = append(c.peers, startAgentPeer(t, cfg))
	}
	c.waitConverged()
	return c
}

// kill kills peer p (SIGKILL) and forgets it.
func (c *peerCluster) kill(p *agentPeer) {
	p.kill()
	c.dead[p] = true
}

// waitConverged waits until each live peer's router lists exactly the live workers, none
// evicted, unhealthy or leaving, each with (at least) its configured types.
func (c *peerCluster) waitConverged() {
	c.t.Helper()
	var last string
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := testkit.WaitFor(ctx, 50*time.Millisecond, func() (bool, error) { return c.converged(&last), nil })
	if err != nil {
		c.t.Fatalf("agent directories did not converge: %v (last: %s)", err, last)
	}
}

// converged reports whether every live peer lists the live workers (see waitConverged).
func (c *peerCluster) converged(last *string) bool {
	{
		want := map[string][]string{}
		for _, p := range c.peers {
			if !c.dead[p] {
				want[p.member] = append(slices.Clone(p.cfg.Types), p.cfg.TestTypes...)
			}
		}
		for _, p := range c.peers {
			if c.dead[p] {
				continue
			}
			r := p.call(peerRequest{Op: "directory"})
			if r.Err != "" {
				*last = r.Err
				return false
			}
			if len(r.Directory.Workers) != len(want) {
				*last = fmt.Sprintf("%s lists %d workers, want %d", p.cfg.ID, len(r.Directory.Workers), len(want))
				return false
			}
			for _, w := range r.Directory.Workers {
				types, ok := want[w.ID]
				if !ok || w.Evicted || w.Unhealthy || w.Leaving {
					*last = fmt.Sprintf("%s lists %+v", p.cfg.ID, w)
					return false
				}
				for _, typ := range types {
					if !slices.Contains(w.Types, typ) {
						*last = fmt.Sprintf("%s: worker %s lacks type %s", p.cfg.ID, w.ID, typ)
						return false
					}
				}
			}
		}
		return true
	}
}

// must fails the test when a peer reply carries an error.
func must(t *testing.T, r peerReply) peerReply {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("peer: %s", r.Err)
	}
	return r
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func TestAgentCluster_Send_outcomesAcrossNodes(t *testing.T) {
	c := startPeerCluster(t,
		peerConfig{ID: "n1"},
		peerConfig{ID: "n2", Types: []string{"echo"}, TestTypes: []string{"hang", "fail"}},
		peerConfig{ID: "n3", TestTypes: []string{"private"}})
	n1, n2, n3 := c.peers[0], c.peers[1], c.peers[2]
	send := func(typ, key, tenant, payload string, timeout time.Duration) *peerOutcome {
		t.Helper()
		return must(t, n1.call(peerRequest{Op: "send", Type: typ, Key: key, Tenant: tenant, Payload: payload,
			TimeoutMS: int(timeout / time.Millisecond)})).Outcome
	}
	tests := []struct {
		name, typ, tenant, payload string
		timeout                    time.Duration
		status, code, worker, resp string
	}{
		{"delivered by the remote owner", "echo", "acme", `{"hi":1}`, 5 * time.Second, "delivered", "", n2.member, `{"hi":1}`},
		{"no live owner", "counter", "acme", "", 5 * time.Second, "undeliverable", agents.ReasonNoLiveOwner, "", ""},
		{"deadline passes", "hang", "acme", "", 300 * time.Millisecond, "timeout", agents.ReasonDeadlineExceeded, n2.member, ""},
		{"handler error", "fail", "acme", `"x"`, 5 * time.Second, "error", "", n2.member, ""},
		{"handler panic", "fail", "acme", `"panic"`, 5 * time.Second, "error", agents.ReasonAgentPanicked, n2.member, ""},
		{"cross-tenant send refused", "private", "acme", "", 5 * time.Second, "undeliverable", agents.ReasonTenantRefused, "", ""},
		{"the type's own tenant is served", "private", "globex", "", 5 * time.Second, "delivered", "", n3.member, `"globex"`},
		{"no tenant", "echo", "", "", 5 * time.Second, "undeliverable", agents.ReasonMissingTenant, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			o := send(tt.typ, "k1", tt.tenant, tt.payload, tt.timeout)
			if o.Status != tt.status || agents.ReasonCode(o.Reason) != tt.code {
				t.Fatalf("outcome %+v, want %s %s", o, tt.status, tt.code)
			}
			if tt.worker != "" && o.Worker != tt.worker || tt.resp != "" && o.Response != tt.resp {
				t.Fatalf("outcome %+v, want worker %s response %s", o, tt.worker, tt.resp)
			}
			if tt.status == "timeout" && (time.Since(start) < tt.timeout || time.Since(start) > tt.timeout+3*time.Second) {
				t.Fatalf("timeout after %v, want about %v", time.Since(start), tt.timeout)
			}
		})
	}
}

func TestAgentCluster_Send_perAgentOrderUnderConcurrentSenders(t *testing.T) {
	c := startPeerCluster(t,
		peerConfig{ID: "n1", Types: []string{"counter"}},
		peerConfig{ID: "n2", Types: []string{"counter"}},
		peerConfig{ID: "n3", Types: []string{"counter"}})
	const perSender = 150
	var pending []<-chan peerReply
	for _, p := range c.peers { // one sender per node, all on the same agent
		pending = append(pending, p.start(peerRequest{Op: "sendmany", Type: "counter", Key: "shared", Tenant: "acme", N: perSender}))
	}
	var all []int
	for i, ch := range pending {
		r := must(t, c.peers[i].await(ch))
		prev := 0
		for _, o := range r.Outcomes {
			var n int
			if o.Status != "delivered" || func() error { _, err := fmt.Sscanf(o.Response, `{"count":%d}`, &n); return err }() != nil {
				t.Fatalf("sender %d: outcome %+v", i, o)
			}
			if n <= prev {
				t.Fatalf("sender %d: count %d after %d: out of order", i, n, prev)
			}
			prev = n
			all = append(all, n)
		}
	}
	slices.Sort(all)
	for i, n := range all {
		if n != i+1 {
			t.Fatalf("counts are not 1..%d: position %d holds %d (a message lost or counted twice)", len(all), i, n)
		}
	}
}

// TestAgentCluster_Send_nonBlockingTypeRunsOnTheWorker: the built-in counter is non-blocking,
// so the owner's worker runs a remote send to its idle agent on its own goroutine; the counts
// stay in order, one per send.
func TestAgentCluster_Send_nonBlockingTypeRunsOnTheWorker(t *testing.T) {
	c := startPeerCluster(t, peerConfig{ID: "n1"}, peerConfig{ID: "n2", Types: []string{"counter"}})
	const sends = 20
	r := must(t, c.peers[0].call(peerRequest{Op: "sendmany", Type: "counter", Key: "k", Tenant: "acme", N: sends}))
	for i, o := range r.Outcomes {
		if want := fmt.Sprintf(`{"count":%d}`, i+1); o.Status != "delivered" || o.Response != want {
			t.Fatalf("send %d: %+v, want delivered %s", i, o, want)
		}
	}
	// The first send activates the agent (its start is queued ahead of it); each later one finds
	// it idle: the sender waits for every answer before it sends again.
	if got := must(t, c.peers[1].call(peerRequest{Op: "tally"})).WorkerInline; got < sends-1 {
		t.Fatalf("the owner's worker ran %d of %d sends on its goroutine, want at least %d", got, sends, sends-1)
	}
}

func TestAgentCluster_Publish_fanOutOncePerSubscriberOneBatchPerWorker(t *testing.T) {
	c := startPeerCluster(t,
		peerConfig{ID: "n1"},
		peerConfig{ID: "n2", Types: []string{"counter"}},
		peerConfig{ID: "n3", Types: []string{"counter"}},
		peerConfig{ID: "n4", Types: []string{"counter"}})
	router := c.peers[0]
	subscribers := keys("s", 1000)
	var subs []*peerSub
	for _, k := range subscribers {
		subs = append(subs, &peerSub{Tenant: "acme", Topic: "news", Type: "counter", Key: k})
	}
	must(t, router.call(peerRequest{Op: "subscribe", Subs: subs}))
	before := batchesByWorker(t, router)
	r := must(t, router.call(peerRequest{Op: "publish", Topic: "news", Tenant: "acme", Payload: `"extra"`}))
	if r.Deliveries != len(subscribers) {
		t.Fatalf("deliveries = %d, want %d", r.Deliveries, len(subscribers))
	}
	after := batchesByWorker(t, router)
	for _, w := range c.peers[1:] {
		if got := after[w.member] - before[w.member]; got != 1 {
			t.Errorf("worker %s got %d publish batches, want 1", w.cfg.ID, got)
		}
	}
	if got := after[router.member] - before[router.member]; got != 0 {
		t.Errorf("the router's own worker (no counter) got %d batches", got)
	}
	// Each subscriber handled the publish exactly once: its next count is 2.
	r = must(t, router.call(peerRequest{Op: "sendkeys", Type: "counter", Keys: subscribers, Tenant: "acme"}))
	for i, o := range r.Outcomes {
		if o.Status != "delivered" || o.Response != `{"count":2}` {
			t.Fatalf("subscriber %s: %+v, want count 2", subscribers[i], o)
		}
	}
	// Another tenant's publish reaches none of them.
	if r := must(t, router.call(peerRequest{Op: "publish", Topic: "news", Tenant: "globex"})); r.Deliveries != 0 {
		t.Fatalf("globex publish delivered %d", r.Deliveries)
	}
}

// batchesByWorker returns the publish batches p's router sent each worker.
func batchesByWorker(t *testing.T, p *agentPeer) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, w := range must(t, p.call(peerRequest{Op: "directory"})).Directory.Workers {
		out[w.ID] = w.PublishBatches
	}
	return out
}

// owners maps each key to the worker that answered it, failing on an undelivered one.
func owners(t *testing.T, r peerReply, ks []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, o := range r.Outcomes {
		if o.Status != "delivered" {
			t.Fatalf("key %s: %+v", ks[i], o)
		}
		out[ks[i]] = o.Worker
	}
	return out
}

// errorf is fmt.Errorf for polling conditions.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
