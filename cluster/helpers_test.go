package cluster

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/dairuntime/dair/internal/testsupport"
	"github.com/dairuntime/dair/testkit/leak"
)

func TestMain(m *testing.M) {
	if seed := os.Getenv(peerEnv); seed != "" {
		os.Exit(runPeer(seed))
	}
	goleak.VerifyTestMain(m, leak.Protoactor()...)
}

// testNode is one in-process node: an actor system plus its membership.
type testNode struct {
	topo *topoTap
	sys  *actor.ActorSystem
	m    *Membership
	ft   *FaultTransport // nil unless started with a fault transport
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
		Keyring:   cfg.Keyring,
		Profile:   profileOr(cfg.Profile),
		Roles:     []string{"runtime"},
		ActorHost: "127.0.0.1",
		ActorPort: cfg.ActorPort,
		noServe:   cfg.noServe,
		Logger:    zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).With(zap.String("node", nodeID)),
	}
	n := &testNode{sys: newSystem()}
	n.topo = tapTopology(n.sys)
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
	testsupport.Eventually(t, timeout, 10*time.Millisecond, cond, what)
}

// waitEvent returns the first event on ch matching kind and member id, or fails after timeout.
func waitEvent(t testing.TB, ch <-chan Event, timeout time.Duration, kind EventKind, id string) Event {
	t.Helper()
	return waitEvents(t, ch, timeout, kind, id)[0]
}

// waitEvents waits, in any order, for one event of kind per id and returns them in ids order.
func waitEvents(t testing.TB, ch <-chan Event, timeout time.Duration, kind EventKind, ids ...string) []Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	got := map[string]Event{}
	for len(got) < len(ids) {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event channel closed waiting for %v %v", kind, ids)
			}
			if ev.Kind == kind && slices.Contains(ids, ev.Member.ID) {
				got[ev.Member.ID] = ev
			}
		case <-timer.C:
			t.Fatalf("no %v for all of %v within %v (got %d)", kind, ids, timeout, len(got))
		}
	}
	out := make([]Event, len(ids))
	for i, id := range ids {
		out[i] = got[id]
	}
	return out
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

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	return testsupport.FreePort(t)
}

// topoTap records the member ids of the last *pcluster.ClusterTopology published on a
// system's event stream (protoactor's MemberList itself is read without a lock).
type topoTap struct {
	mu  sync.Mutex // guards ids
	ids []string
}

func tapTopology(sys *actor.ActorSystem) *topoTap {
	tap := &topoTap{}
	sys.EventStream.Subscribe(func(evt any) {
		if topo, ok := evt.(*pcluster.ClusterTopology); ok {
			var ids []string
			for _, m := range topo.Members {
				ids = append(ids, m.Id)
			}
			slices.Sort(ids)
			tap.mu.Lock()
			tap.ids = ids
			tap.mu.Unlock()
		}
	})
	return tap
}

// topology returns the sorted ids of protoactor's last published topology.
func (n *testNode) topology() []string {
	n.topo.mu.Lock()
	defer n.topo.mu.Unlock()
	return slices.Clone(n.topo.ids)
}

func profileOr(p Profile) Profile {
	if p == "" {
		return ProfileLocal
	}
	return p
}
