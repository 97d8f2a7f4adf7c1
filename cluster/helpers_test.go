package cluster

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/dairuntime/dair/testkit/leak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leak.Protoactor()...)
}

// testNode is one in-process node: an actor system plus its membership.
type testNode struct {
	sys *actor.ActorSystem
	m   *Membership
	ft  *FaultTransport // nil unless started with a fault transport
}

// newSystem returns an actor system with protoactor's logs silenced.
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

// startNode starts a local-profile node joining seeds, without serving protoactor's gRPC
// server (see Config.noServe); the actor port is reserved from the OS.
func startNode(t testing.TB, nodeID string, fault bool, seeds ...string) *testNode {
	t.Helper()
	return startNodeCfg(t, Config{NodeID: nodeID, Join: seeds, ActorPort: freePort(t), noServe: true}, fault)
}

// startNodeCfg starts a local-profile node from cfg.
func startNodeCfg(t testing.TB, cfg Config, fault bool) *testNode {
	t.Helper()
	nodeID := cfg.NodeID
	cfg = Config{
		NodeID:    nodeID,
		BindAddr:  "127.0.0.1:0",
		Join:      cfg.Join,
		Profile:   ProfileLocal,
		Roles:     []string{"runtime"},
		ActorHost: "127.0.0.1",
		ActorPort: cfg.ActorPort,
		noServe:   cfg.noServe,
	}
	n := &testNode{sys: newSystem()}
	if fault {
		nt, err := NewLoopbackTransport()
		if err != nil {
			t.Fatalf("loopback transport: %v", err)
		}
		n.ft = NewFaultTransport(nt)
		cfg.Transport = n.ft
	}
	m, err := Start(context.Background(), n.sys, cfg)
	if err != nil {
		t.Fatalf("start %s: %v", nodeID, err)
	}
	n.m = m
	t.Cleanup(func() { n.stop(t, false) })
	return n
}

// stop shuts the node down (idempotent).
func (n *testNode) stop(t testing.TB, graceful bool) {
	t.Helper()
	if err := n.m.Shutdown(graceful); err != nil {
		t.Errorf("shutdown %s: %v", n.m.Self().NodeID, err)
	}
	if !n.sys.IsStopped() {
		n.sys.Shutdown()
	}
}

// addr returns the node's memberlist address, for seeds.
func (n *testNode) addr() string { return n.m.Self().MemberlistAddr }

// ids returns the sorted member ids a node sees.
func (n *testNode) ids() []string {
	var out []string
	for _, m := range n.m.Members() {
		out = append(out, m.ID)
	}
	return out
}

// sortedIDs returns the sorted actor system ids of nodes.
func sortedIDs(nodes ...*testNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.sys.ID)
	}
	slices.Sort(out)
	return out
}

// eventually polls cond every 10ms until it holds or fails the test after timeout.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		timer := time.NewTimer(10 * time.Millisecond)
		<-timer.C
	}
}

// waitEvent returns the first event on ch matching kind and member id, or fails after timeout.
func waitEvent(t testing.TB, ch <-chan Event, timeout time.Duration, kind EventKind, id string) Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event channel closed waiting for %v %s", kind, id)
			}
			if ev.Kind == kind && ev.Member.ID == id {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %v for %s within %v", kind, id, timeout)
		}
	}
}

// expectNoEvent fails if an event of kind arrives on ch within d.
func expectNoEvent(t testing.TB, ch <-chan Event, d time.Duration, kind EventKind) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if ev.Kind == kind {
				t.Fatalf("unexpected %v for %s", kind, ev.Member.ID)
			}
		case <-timer.C:
			return
		}
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return port
}
