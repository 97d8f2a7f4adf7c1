package cluster

import (
	"context"
	"testing"
	"time"
)

// startSession starts a node of process session (started at started), without serving gRPC.
func startSession(t *testing.T, nodeID, session string, started time.Time, seeds ...string) *testNode {
	t.Helper()
	n := &testNode{sys: newSystem()}
	m, err := Start(context.Background(), n.sys, Config{NodeID: nodeID, BindAddr: "127.0.0.1:0", Join: seeds,
		Profile: ProfileLocal, ActorHost: "127.0.0.1", ActorPort: freePort(t), Session: session, Started: started, noServe: true})
	if err != nil {
		t.Fatalf("start %s/%s: %v", nodeID, session, err)
	}
	n.m = m
	t.Cleanup(func() { n.stop(t, false) })
	return n
}

// TestMembership_Duplicate_secondProcessYields: a second process joining with a node id that
// a live member uses sees the duplicate; the first does not.
func TestMembership_Duplicate_secondProcessYields(t *testing.T) {
	t0 := time.Now()
	first := startSession(t, "n1", "aaaa", t0)
	other := startSession(t, "n2", "cccc", t0, first.addr())
	second := startSession(t, "n1", "bbbb", t0.Add(time.Second), first.addr())
	eventually(t, 5*time.Second, func() bool { return len(second.m.Members()) == 3 && len(first.m.Members()) == 3 },
		"the three members see each other")
	d, ok := second.m.Duplicate()
	if !ok || d.ID != first.m.Self().ID || d.Session != "aaaa" || !d.Started.Equal(t0.Truncate(time.Millisecond)) {
		t.Fatalf("second.Duplicate() = %+v, %v; want the first process", d, ok)
	}
	if d, ok := first.m.Duplicate(); ok {
		t.Fatalf("first.Duplicate() = %+v; the older process keeps its id", d)
	}
	if d, ok := other.m.Duplicate(); ok {
		t.Fatalf("other.Duplicate() = %+v", d)
	}
}
