package agents

import (
	"slices"
	"strconv"
	"testing"

	"github.com/dairuntime/dair/messages"
)

// reg returns a registration of worker id with types (name or name=tenant1,tenant2).
func reg(id string, version uint64, types ...*messages.AgentType) *messages.AgentWorkerRegistration {
	return &messages.AgentWorkerRegistration{WorkerId: id, NodeId: "node-" + id, Address: id + ":1", Version: version, Types: types}
}

func typ(name string, tenants ...string) *messages.AgentType {
	return &messages.AgentType{Name: name, Tenants: tenants}
}

func aid(t, k string) *messages.AgentId { return &messages.AgentId{Type: t, Key: k} }

// directoryOf returns a directory of self with members w1.. wn owning typ.
func directoryOf(self string, typ string, workers ...string) *Directory {
	d := NewDirectory(Config{}, Member{ID: self, NodeID: "node-" + self})
	var ms []Member
	for _, w := range workers {
		ms = append(ms, Member{ID: w, NodeID: "node-" + w, Address: w + ":1", Types: []string{typ}})
	}
	if !slices.Contains(workers, self) {
		ms = append(ms, Member{ID: self, NodeID: "node-" + self})
	}
	d.SetMembers(ms)
	return d
}

func TestTable_Route_seedRules(t *testing.T) {
	tests := []struct {
		name       string
		dir        func() *Directory
		tenant     string
		id         *messages.AgentId
		wantWorker string // "" when refused
		wantReason string // reason code when refused
	}{
		{"one owner owns every key of its type (the seed's single owner)",
			func() *Directory { return directoryOf("r", "echo", "w1") }, "acme", aid("echo", "k1"), "w1", ""},
		{"a type nobody owns is undeliverable",
			func() *Directory { return directoryOf("r", "echo", "w1") }, "acme", aid("counter", "k1"), "", ReasonNoLiveOwner},
		{"a message without tenant is undeliverable",
			func() *Directory { return directoryOf("r", "echo", "w1") }, "", aid("echo", "k1"), "", ReasonMissingTenant},
		{"a tenant outside the type's registration is refused",
			func() *Directory {
				d := directoryOf("r", "echo", "w1")
				d.Register(reg("w1", 1, typ("echo", "globex")))
				return d
			}, "acme", aid("echo", "k1"), "", ReasonTenantRefused},
		{"a tenant inside the type's registration is routed",
			func() *Directory {
				d := directoryOf("r", "echo", "w1")
				d.Register(reg("w1", 1, typ("echo", "globex", "acme")))
				return d
			}, "acme", aid("echo", "k1"), "w1", ""},
		{"this node's own registered types route to itself",
			func() *Directory {
				d := directoryOf("r", "echo")
				d.Register(reg("r", 1, typ("counter")))
				return d
			}, "acme", aid("counter", "k"), "r", ""},
		{"an evicted owner owns nothing",
			func() *Directory {
				d := directoryOf("r", "echo", "w1")
				d.Evict("w1")
				return d
			}, "acme", aid("echo", "k1"), "", ReasonNoLiveOwner},
		{"a leaving owner takes no new deliveries",
			func() *Directory {
				d := directoryOf("r", "echo", "w1", "w2")
				l := reg("w1", 1, typ("echo"))
				l.Leaving = true
				d.Register(l)
				return d
			}, "acme", aid("echo", "k-leave"), "w2", ""},
		{"an unhealthy sole owner still owns its keys",
			func() *Directory {
				d := directoryOf("r", "echo", "w1")
				d.RPCTimedOut("w1")
				return d
			}, "acme", aid("echo", "k1"), "w1", ""},
		{"an unhealthy owner's keys move to a healthy one",
			func() *Directory {
				d := directoryOf("r", "echo", "w1", "w2")
				d.RPCTimedOut("w1")
				return d
			}, "acme", aid("echo", "k1"), "w2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.dir().Table().Route(tt.tenant, tt.id)
			switch {
			case tt.wantWorker == "" && (r.Worker != nil || ReasonCode(r.Reason) != tt.wantReason):
				t.Fatalf("Route = %+v %q, want refusal %s", r.Worker, r.Reason, tt.wantReason)
			case tt.wantWorker != "" && (r.Worker == nil || r.Worker.ID != tt.wantWorker):
				t.Fatalf("Route = %+v %q, want worker %s", r.Worker, r.Reason, tt.wantWorker)
			}
		})
	}
}

func TestRendezvous_shardsKeysEvenly(t *testing.T) {
	owners := []string{"w1", "w2", "w3"}
	count := map[string]int{}
	const n = 30000
	for i := range n {
		count[Rendezvous(owners, "acme", "counter", "k"+strconv.Itoa(i))]++
	}
	for _, w := range owners {
		if c := count[w]; c < n*30/100 || c > n*37/100 {
			t.Errorf("%s owns %d of %d keys, want about a third", w, c, n)
		}
	}
}

func TestRendezvous_lossMovesOnlyTheLostOwnersKeys(t *testing.T) {
	before := []string{"w1", "w2", "w3"}
	after := []string{"w1", "w3"}
	moved := 0
	for i := range 5000 {
		k := "k" + strconv.Itoa(i)
		b, a := Rendezvous(before, "acme", "counter", k), Rendezvous(after, "acme", "counter", k)
		if b != "w2" && a != b {
			t.Fatalf("key %s moved from surviving owner %s to %s", k, b, a)
		}
		if b == "w2" {
			moved++
			if a == "w2" {
				t.Fatalf("key %s still on the lost owner", k)
			}
		}
	}
	if moved == 0 {
		t.Fatal("the lost owner owned no key")
	}
}

func TestRendezvous_sameAnswerOnEveryNode(t *testing.T) {
	for i := range 1000 {
		k := "k" + strconv.Itoa(i)
		a := Rendezvous([]string{"w1", "w2", "w3"}, "acme", "echo", k)
		b := Rendezvous([]string{"w3", "w1", "w2"}, "acme", "echo", k)
		c := directoryOf("w2", "echo", "w1", "w2", "w3").Table().Route("acme", aid("echo", k)).Worker.ID
		if a != b || a != c {
			t.Fatalf("key %s: %s, %s, %s", k, a, b, c)
		}
	}
	if Rendezvous(nil, "t", "x", "k") != "" {
		t.Fatal("Rendezvous(no owners) != \"\"")
	}
}

func TestTable_Owners_Types(t *testing.T) {
	d := directoryOf("r", "echo", "w2", "w1")
	d.Register(reg("w1", 1, typ("counter")))
	tb := d.Table()
	if got := tb.Owners("echo"); !slices.Equal(got, []string{"w1", "w2"}) {
		t.Errorf("Owners(echo) = %v", got)
	}
	if got := tb.Types(); !slices.Equal(got, []string{"counter", "echo"}) {
		t.Errorf("Types() = %v", got)
	}
	if tb.Self() != "r" || tb.Worker("w1").Address != "w1:1" || tb.Worker("nope") != nil {
		t.Errorf("Self/Worker = %s %+v", tb.Self(), tb.Worker("w1"))
	}
}
