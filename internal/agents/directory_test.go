package agents

import (
	"slices"
	"testing"

	"github.com/dairuntime/dair/messages"
)

func sub(id, tenant, topic, agentType, key string) *messages.Subscription {
	return &messages.Subscription{Id: id, TenantId: tenant, Topic: topic, AgentType: agentType, AgentKey: key}
}

func TestDirectory_health_seedRules(t *testing.T) {
	cfg := Config{FailureThreshold: 2}
	tests := []struct {
		name        string
		run         func(d *Directory) bool // returns the last eviction verdict
		wantEvict   bool
		wantEvicted bool
		wantOwners  []string // owners of echo afterwards
		wantSubs    int
	}{
		{"a failed probe counts one failure and does not evict below the threshold",
			func(d *Directory) bool { return d.ProbeFailed("w1") }, false, false, []string{"w2"}, 2},
		{"a successful probe resets the failure counter",
			func(d *Directory) bool {
				d.ProbeFailed("w1")
				d.ProbeSucceeded("w1", 3)
				return d.ProbeFailed("w1")
			}, false, false, []string{"w2"}, 2},
		{"failures reaching the threshold evict the worker",
			func(d *Directory) bool {
				d.ProbeFailed("w1")
				return d.ProbeFailed("w1")
			}, true, false, []string{"w2"}, 2},
		{"eviction drops the worker's types and subscriptions",
			func(d *Directory) bool { return d.Evict("w1") }, true, true, []string{"w2"}, 1},
		{"an RPC exceeding the RPC timeout marks the worker unhealthy",
			func(d *Directory) bool { return d.RPCTimedOut("w1") }, false, false, []string{"w2"}, 2},
		{"a successful probe makes an unhealthy worker an owner again",
			func(d *Directory) bool {
				d.RPCTimedOut("w1")
				d.ProbeSucceeded("w1", 0)
				return false
			}, false, false, []string{"w1", "w2"}, 2},
		{"a newer registration re-admits an evicted worker",
			func(d *Directory) bool {
				d.Evict("w1")
				return !d.Register(&messages.AgentWorkerRegistration{WorkerId: "w1", Version: 1,
					Types: []*messages.AgentType{typ("echo")}, Subscriptions: []*messages.Subscription{sub("s1", "acme", "news", "echo", "")}})
			}, false, false, []string{"w1", "w2"}, 2},
		{"this node's own worker is never evicted",
			func(d *Directory) bool {
				d.ProbeFailed("r")
				d.ProbeFailed("r")
				return d.Evict("r")
			}, false, false, []string{"w1", "w2"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDirectory(cfg, Member{ID: "r", NodeID: "nr"})
			d.SetMembers([]Member{{ID: "r"}, {ID: "w1", Address: "a1", Types: []string{"echo"}}, {ID: "w2", Address: "a2", Types: []string{"echo"}}})
			d.Register(&messages.AgentWorkerRegistration{WorkerId: "w1", Version: 1, Types: []*messages.AgentType{typ("echo")},
				Subscriptions: []*messages.Subscription{sub("s1", "acme", "news", "echo", "")}})
			d.Register(&messages.AgentWorkerRegistration{WorkerId: "w2", Version: 1, Types: []*messages.AgentType{typ("echo")},
				Subscriptions: []*messages.Subscription{sub("s2", "acme", "news", "echo", "x")}})
			if got := tt.run(d); got != tt.wantEvict {
				t.Fatalf("verdict = %v, want %v", got, tt.wantEvict)
			}
			w, _ := d.Worker("w1")
			if w.Evicted != tt.wantEvicted {
				t.Errorf("w1 evicted = %v, want %v", w.Evicted, tt.wantEvicted)
			}
			if got := d.Table().Owners("echo"); !slices.Equal(got, tt.wantOwners) {
				t.Errorf("owners of echo = %v, want %v", got, tt.wantOwners)
			}
			if got := d.Index().Len(); got != tt.wantSubs {
				t.Errorf("subscriptions = %d, want %d", got, tt.wantSubs)
			}
		})
	}
}

func TestDirectory_membership_seedRules(t *testing.T) {
	d := NewDirectory(Config{}, Member{ID: "r", NodeID: "nr"})
	left := d.SetMembers([]Member{{ID: "r"}, {ID: "w1", NodeID: "n1", Address: "a1", Types: []string{"echo"}}})
	if len(left) != 0 || !slices.Equal(d.Table().Owners("echo"), []string{"w1"}) {
		t.Fatalf("after join: left %v, owners %v", left, d.Table().Owners("echo"))
	}
	// A registration that arrives before the member is kept while it is not a member.
	d.Register(&messages.AgentWorkerRegistration{WorkerId: "w2", NodeId: "n2", Address: "a2", Version: 3,
		Types: []*messages.AgentType{typ("echo")}, Subscriptions: []*messages.Subscription{sub("s", "acme", "t", "echo", "k")}})
	left = d.SetMembers([]Member{{ID: "r"}, {ID: "w1", Address: "a1", Types: []string{"echo"}}})
	if len(left) != 0 || !slices.Equal(d.Table().Owners("echo"), []string{"w1", "w2"}) {
		t.Fatalf("registered non-member: left %v, owners %v", left, d.Table().Owners("echo"))
	}
	// Stale and repeated registrations are ignored; newer ones replace the subscriptions.
	if d.Register(&messages.AgentWorkerRegistration{WorkerId: "w2", Version: 3}) {
		t.Fatal("a registration of the same version was accepted")
	}
	if !d.Register(&messages.AgentWorkerRegistration{WorkerId: "w2", Version: 4, Types: []*messages.AgentType{typ("echo")}}) || d.Index().Len() != 0 {
		t.Fatalf("newer registration: subs %d", d.Index().Len())
	}
	if d.KnownVersion("w2") != 4 || d.KnownVersion("nope") != 0 {
		t.Fatalf("KnownVersion = %d", d.KnownVersion("w2"))
	}
	// A member that leaves is removed with its types; an evicted non-member is removed too.
	d.SetMembers([]Member{{ID: "r"}, {ID: "w1", Address: "a1", Types: []string{"echo"}}, {ID: "w2", Address: "a2", Types: []string{"echo"}}})
	left = d.SetMembers([]Member{{ID: "r"}, {ID: "w2", Address: "a2", Types: []string{"echo"}}})
	if !slices.Equal(left, []string{"w1"}) || !slices.Equal(d.Table().Owners("echo"), []string{"w2"}) {
		t.Fatalf("after leave: left %v, owners %v", left, d.Table().Owners("echo"))
	}
	if _, ok := d.Worker("w1"); ok {
		t.Fatal("a departed member is still known")
	}
	if d.KnownVersion("w2") != 4 {
		t.Fatal("KnownVersion of a live member changed")
	}
	d.Evict("w2")
	if d.KnownVersion("w2") != 0 {
		t.Fatal("an evicted worker's version must be fetched again")
	}
	targets := d.ProbeTargets()
	if len(targets) != 1 || targets[0].ID != "w2" {
		t.Fatalf("ProbeTargets = %+v (evicted members are still probed, self never)", targets)
	}
	// A member that is not an agent worker yet (no registration, no types) is not failed by
	// its probes; one that advertises types is.
	d.SetMembers([]Member{{ID: "r"}, {ID: "w2", Address: "a2"}, {ID: "w4", Address: "a4"}, {ID: "w5", Address: "a5", Types: []string{"echo"}}})
	for range 3 {
		if d.ProbeFailed("w4") {
			t.Fatal("a starting member was evicted")
		}
	}
	if w, _ := d.Worker("w4"); w.Failures != 0 {
		t.Fatalf("starting member failures = %d", w.Failures)
	}
	if d.ProbeFailed("w5"); !d.ProbeFailed("w5") {
		t.Fatal("a member advertising types was not evicted after 2 failed probes")
	}
	d.Register(&messages.AgentWorkerRegistration{WorkerId: "w3", Version: 1})
	d.Evict("w3")
	if _, ok := d.Worker("w3"); ok {
		t.Fatal("an evicted non-member is still known")
	}
	if ws := d.Workers(); len(ws) != 4 || !ws[0].Self {
		t.Fatalf("Workers = %+v", ws)
	}
}
