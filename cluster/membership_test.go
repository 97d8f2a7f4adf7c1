package cluster

import (
	"slices"
	"testing"
	"time"
)

// detectTimeout bounds how long peers may take to report a crashed member with ProfileLocal
// (measured 1.0–1.5 s; doubled and padded for -race on 2 cores).
const detectTimeout = 4 * time.Second

func TestMembership_Members_threeNodesSeeEachOther(t *testing.T) {
	a := startNode(t, "node-a", false)
	b := startNode(t, "node-b", false, a.addr())
	c := startNode(t, "node-c", false, a.addr())
	want := sortedIDs(a, b, c)
	for _, n := range []*testNode{a, b, c} {
		eventually(t, 5*time.Second, func() bool { return slices.Equal(n.ids(), want) },
			"all three members seen by "+n.m.Self().NodeID)
	}

	tests := []struct {
		name string
		node *testNode
	}{{"a", a}, {"b", b}, {"c", c}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			self := tt.node.m.Self()
			if self.ID != tt.node.sys.ID {
				t.Errorf("Self().ID = %q, want actor system id %q", self.ID, tt.node.sys.ID)
			}
			if self.Address != tt.node.sys.Address() {
				t.Errorf("Self().Address = %q, want %q", self.Address, tt.node.sys.Address())
			}
			for _, m := range a.m.Members() {
				if m.ID == self.ID && (m.NodeID != self.NodeID || !m.HasRole("runtime")) {
					t.Errorf("a sees %+v, want node id %q with role runtime", m, self.NodeID)
				}
			}
			// The topology fed to protoactor's MemberList matches Members().
			if topo := tt.node.topology(); !slices.Equal(topo, want) {
				t.Errorf("protoactor topology = %v, want %v", topo, want)
			}
		})
	}
}

func TestMembership_Subscribe_leaveAndCrash(t *testing.T) {
	tests := []struct {
		name     string
		graceful bool
		within   time.Duration
	}{
		{"graceful leave", true, 2 * time.Second},
		{"crash without leave", false, detectTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startNode(t, "node-a", false)
			b := startNode(t, "node-b", false, a.addr())
			c := startNode(t, "node-c", false, a.addr())
			want := sortedIDs(a, b, c)
			for _, n := range []*testNode{a, b} {
				eventually(t, 5*time.Second, func() bool { return slices.Equal(n.ids(), want) }, "join")
			}
			evA, cancelA := a.m.Subscribe(8)
			defer cancelA()
			evB, cancelB := b.m.Subscribe(8)
			defer cancelB()

			start := time.Now()
			c.stop(t, tt.graceful)
			ev := waitEvent(t, evA, tt.within, MemberLeft, c.sys.ID)
			t.Logf("a saw %s leave after %v", ev.Member.NodeID, time.Since(start))
			waitEvent(t, evB, tt.within, MemberLeft, c.sys.ID)
			t.Logf("b saw it after %v", time.Since(start))
			if ev.Member.NodeID != "node-c" {
				t.Errorf("left member node id = %q, want node-c", ev.Member.NodeID)
			}
			left := sortedIDs(a, b)
			for _, n := range []*testNode{a, b} {
				if got := n.ids(); !slices.Equal(got, left) {
					t.Errorf("members = %v, want %v", got, left)
				}
				if slices.Contains(n.topology(), c.sys.ID) {
					t.Errorf("protoactor topology still contains %s", c.sys.ID)
				}
				if !n.m.Cluster().Remote.BlockList().IsBlocked(c.sys.ID) {
					t.Errorf("protoactor did not block departed id %s", c.sys.ID)
				}
			}
		})
	}
}

func TestMembership_Subscribe_restartWithNewID(t *testing.T) {
	a := startNode(t, "node-a", false)
	b := startNode(t, "node-b", false, a.addr())
	eventually(t, 5*time.Second, func() bool { return len(a.m.Members()) == 2 }, "b joins")
	ev, cancel := a.m.Subscribe(8)
	defer cancel()

	oldID := b.sys.ID
	b.stop(t, false)
	waitEvent(t, ev, detectTimeout, MemberLeft, oldID)

	b2 := startNode(t, "node-b", false, a.addr())
	if b2.sys.ID == oldID {
		t.Fatalf("restarted system reused id %s", oldID)
	}
	joined := waitEvent(t, ev, 5*time.Second, MemberJoined, b2.sys.ID)
	if joined.Member.NodeID != "node-b" {
		t.Errorf("joined node id = %q, want node-b", joined.Member.NodeID)
	}
	want := sortedIDs(a, b2)
	eventually(t, 5*time.Second, func() bool { return slices.Equal(a.ids(), want) && slices.Equal(b2.ids(), want) },
		"a and restarted b see each other")
}

func TestMembership_Subscribe_partitionSelfDeclaredDead(t *testing.T) {
	a := startNodeCfg(t, Config{NodeID: "node-a", ActorPort: freePort(t), noServe: true}, false)
	b := startNode(t, "node-b", false, a.addr())
	c := startNodeCfg(t, Config{NodeID: "node-c", Join: []string{a.addr()}, ActorPort: freePort(t), noServe: true}, true)
	want := sortedIDs(a, b, c)
	for _, n := range []*testNode{a, b, c} {
		eventually(t, 5*time.Second, func() bool { return slices.Equal(n.ids(), want) }, "join")
	}
	evA, cancelA := a.m.Subscribe(8)
	defer cancelA()
	evC, cancelC := c.m.Subscribe(8)
	defer cancelC()

	c.ft.Partition()
	waitEvent(t, evA, detectTimeout, MemberLeft, c.sys.ID)
	// The isolated side detects more slowly: memberlist's local-health awareness stretches
	// its probe timeouts while all its probes fail.
	waitEvents(t, evC, 15*time.Second, MemberLeft, a.sys.ID, b.sys.ID)

	c.ft.Heal()
	start := time.Now()
	dead := waitEvent(t, evC, 10*time.Second, SelfDeclaredDead, c.sys.ID)
	t.Logf("c learned it was declared dead %v after heal", time.Since(start))
	if dead.Member.NodeID != "node-c" {
		t.Errorf("SelfDeclaredDead member = %+v, want node-c", dead.Member)
	}
	// The majority never re-admits the old id and is not told to die itself.
	expectNoEvent(t, evA, time.Second, SelfDeclaredDead)
	if got, want := a.ids(), sortedIDs(a, b); !slices.Equal(got, want) {
		t.Errorf("a members = %v, want %v", got, want)
	}
}

func TestMembership_Shutdown_idempotentAndClosesSubscriptions(t *testing.T) {
	a := startNode(t, "node-a", false)
	ch, cancel := a.m.Subscribe(1)
	a.stop(t, true)
	a.stop(t, true)
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("subscription channel not closed by Shutdown")
	}
	late, cancelLate := a.m.Subscribe(1)
	defer cancelLate()
	if _, ok := <-late; ok {
		t.Fatal("subscription after Shutdown not closed")
	}
}

func TestMembership_Members_keyring(t *testing.T) {
	key := []byte("0123456789abcdef")
	other := []byte("fedcba9876543210")
	start := func(id string, k []byte, seeds ...string) *testNode {
		return startNodeCfg(t, Config{NodeID: id, Join: seeds, Keyring: [][]byte{k}, ActorPort: freePort(t), noServe: true}, false)
	}
	a := start("node-a", key)
	b := start("node-b", key, a.addr())
	want := sortedIDs(a, b)
	eventually(t, 5*time.Second, func() bool { return slices.Equal(a.ids(), want) && slices.Equal(b.ids(), want) },
		"nodes sharing a key see each other")

	ev, cancel := a.m.Subscribe(8)
	defer cancel()
	start("node-x", other, a.addr())
	// Only node-x matters: node-b's own join may still be on its way to a fresh subscriber.
	deadline := time.After(time.Second)
	for done := false; !done; {
		select {
		case e := <-ev:
			if e.Kind == MemberJoined && e.Member.NodeID == "node-x" {
				t.Fatalf("node-x joined with a foreign key: %+v", e.Member)
			}
		case <-deadline:
			done = true
		}
	}
	if got := a.ids(); !slices.Equal(got, want) {
		t.Errorf("members with a foreign key = %v, want %v", got, want)
	}
}
