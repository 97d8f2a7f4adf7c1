package testkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// agentProbeWait bounds AgentProbe.Expect and the in-process agent cluster's waits.
const agentProbeWait = 15 * time.Second

// AgentCall is one message an AgentProbe received, waiting for the test's answer. Reply or
// Fail must be called once (an unanswered call holds its agent until the message's deadline).
type AgentCall struct {
	Env    *messages.MessageEnvelope
	Tenant string
	answer chan agentAnswer
}

type agentAnswer struct {
	payload []byte
	err     error
}

// Reply answers the call with payload (DELIVERED). It never blocks.
func (c *AgentCall) Reply(payload []byte) { c.answer <- agentAnswer{payload: payload} }

// Fail answers the call with err (an ERROR outcome). It never blocks.
func (c *AgentCall) Fail(err error) { c.answer <- agentAnswer{err: err} }

// AgentProbe is an agent type whose agents hand every message to the test: the test takes it
// with Expect and answers it with Reply or Fail, or lets AutoReply answer. Each agent still
// handles one message at a time, so an unanswered call holds its agent (but not the others).
// Expect and ExpectNone must be called from the test goroutine; the rest is goroutine-safe.
type AgentProbe struct {
	t     testing.TB
	Type  string
	inbox chan *AgentCall
}

// NewAgentProbe registers agent type typ on every node of nodes (each becomes one of its owners)
// and returns the probe that receives its messages. It fails the test if a registration fails.
func NewAgentProbe(t testing.TB, typ string, nodes []*actors.Node, opts ...actors.AgentTypeOption) *AgentProbe {
	t.Helper()
	p := &AgentProbe{t: t, Type: typ, inbox: make(chan *AgentCall, probeBuffer)}
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), agentProbeWait)
		err := n.RegisterAgentType(ctx, typ, p.handle, opts...)
		cancel()
		if err != nil {
			t.Fatalf("testkit: register agent probe %s on %s: %v", typ, n.ID(), err)
		}
	}
	return p
}

// handle is the probe type's handler: it hands the message over and waits for the answer or
// the message's deadline.
func (p *AgentProbe) handle(ctx context.Context, a *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
	call := &AgentCall{Env: env, Tenant: a.Tenant(), answer: make(chan agentAnswer, 1)}
	select {
	case p.inbox <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case ans := <-call.answer:
		return ans.payload, ans.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Expect returns the next message any agent of the probe's type received, failing the test if
// none arrives within 15 s.
func (p *AgentProbe) Expect() *AgentCall {
	p.t.Helper()
	timer := time.NewTimer(agentProbeWait)
	defer timer.Stop()
	select {
	case c := <-p.inbox:
		return c
	case <-timer.C:
		p.t.Fatalf("testkit: agent probe %s: no message within %v", p.Type, agentProbeWait)
		return nil
	}
}

// ExpectNone fails the test if a message arrives within d.
func (p *AgentProbe) ExpectNone(d time.Duration) {
	p.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case c := <-p.inbox:
		p.t.Fatalf("testkit: agent probe %s: unexpected message %s to %s", p.Type, c.Env.Id, c.Env.Recipient)
	case <-timer.C:
	}
}

// AutoReply answers every message from now on with fn's result, from a goroutine that ends
// with the test. Calls already taken by Expect are not affected.
func (p *AgentProbe) AutoReply(fn func(*AgentCall) ([]byte, error)) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	p.t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for {
			select {
			case c := <-p.inbox:
				b, err := fn(c)
				c.answer <- agentAnswer{payload: b, err: err}
			case <-done:
				return
			}
		}
	}()
}

// AgentClusterOptions configures StartAgentCluster. The zero value of each field means its
// default.
type AgentClusterOptions struct {
	// N is the number of nodes. Default 3.
	N int
	// Types gives node i the built-in agent types Types[i] (Config.AgentTypes); a missing
	// entry means none.
	Types [][]string
	// Agents are every node's agent knobs (health interval, threshold, RPC timeout, ...).
	Agents agents.Config
	// Profile is the membership profile. Default cluster.ProfileLocal.
	Profile cluster.Profile
}

// AgentCluster is N in-process nodes (role runtime, each with its own embedded store and actor
// system) joined by real memberlist membership and protoactor remote on loopback, for agent
// messaging tests. Nodes are stopped with t.Cleanup. Several protoactor remotes in one process
// race on grpc's global logger, so do not use it in tests built with -race.
type AgentCluster struct {
	t     testing.TB
	nodes []*AgentClusterNode
	types map[*AgentClusterNode][]string
}

// AgentClusterNode is one node of an AgentCluster.
type AgentClusterNode struct {
	Node       *actors.Node
	Membership *cluster.Membership
	System     *actor.ActorSystem
	t          testing.TB
	down       bool
}

// StartAgentCluster starts opts.N nodes, the first as seed, and waits until every node's router
// lists every worker. It fails the test on error.
func StartAgentCluster(t testing.TB, opts AgentClusterOptions) *AgentCluster {
	t.Helper()
	if opts.N <= 0 {
		opts.N = 3
	}
	if opts.Profile == "" {
		opts.Profile = cluster.ProfileLocal
	}
	c := &AgentCluster{t: t, types: map[*AgentClusterNode][]string{}}
	var seed []string
	for i := range opts.N {
		var types []string
		if i < len(opts.Types) {
			types = opts.Types[i]
		}
		n := startAgentNode(t, "a"+strconv.Itoa(i+1), types, opts, seed)
		c.nodes = append(c.nodes, n)
		c.types[n] = types
		if i == 0 {
			seed = []string{n.Membership.Self().MemberlistAddr}
		}
	}
	c.WaitConverged()
	return c
}

func startAgentNode(t testing.TB, id string, types []string, opts AgentClusterOptions, seed []string) *AgentClusterNode {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	m, err := cluster.Start(context.Background(), sys, cluster.Config{NodeID: id, Join: seed, Profile: opts.Profile,
		Roles: []string{actors.RoleRuntime}, ActorHost: "127.0.0.1"})
	if err != nil {
		t.Fatalf("testkit: start membership of %s: %v", id, err)
	}
	n := &AgentClusterNode{Membership: m, System: sys, t: t}
	t.Cleanup(func() { n.Stop(context.Background()) })
	n.Node, err = actors.Start(context.Background(), actors.Config{NodeID: id, Store: OpenStore(t, BackendEmbedded, nil),
		Roles: []string{actors.RoleRuntime}, System: sys, Cluster: m, AgentTypes: types, Agents: opts.Agents,
		HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("testkit: start node %s: %v", id, err)
	}
	return n
}

// Node returns node i (0-based).
func (c *AgentCluster) Node(i int) *AgentClusterNode { return c.nodes[i] }

// Nodes returns every node, in start order. The caller owns the slice.
func (c *AgentCluster) Nodes() []*AgentClusterNode { return slices.Clone(c.nodes) }

// ActorNodes returns the actors.Node of every node still up.
func (c *AgentCluster) ActorNodes() []*actors.Node {
	var out []*actors.Node
	for _, n := range c.nodes {
		if !n.down {
			out = append(out, n.Node)
		}
	}
	return out
}

// WaitConverged waits until every node still up lists, in its router's directory, exactly the
// workers of the nodes still up, each healthy, not evicted and owning its built-in types. It
// fails the test after 15 s.
func (c *AgentCluster) WaitConverged() {
	c.t.Helper()
	var last string
	ctx, cancel := context.WithTimeout(context.Background(), agentProbeWait)
	defer cancel()
	err := WaitFor(ctx, 20*time.Millisecond, func() (bool, error) {
		want := map[string][]string{}
		for _, n := range c.nodes {
			if !n.down {
				want[n.Node.Incarnation()] = c.types[n]
			}
		}
		for _, n := range c.nodes {
			if n.down {
				continue
			}
			ok, why := n.sees(want)
			if !ok {
				last = n.Node.ID() + ": " + why
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		c.t.Fatalf("testkit: agent directories did not converge within %v (last: %s)", agentProbeWait, last)
	}
}

// sees reports whether the node's router lists exactly the workers of want (worker id -> its
// types), all usable and owning their types.
func (n *AgentClusterNode) sees(want map[string][]string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, err := n.Node.AgentDirectory(ctx)
	if err != nil {
		return false, err.Error()
	}
	if len(d.Workers) != len(want) {
		return false, fmt.Sprintf("%d workers, want %d", len(d.Workers), len(want))
	}
	for _, w := range d.Workers {
		types, ok := want[w.ID]
		if !ok || w.Evicted || w.Unhealthy || w.Leaving {
			return false, fmt.Sprintf("worker %+v", w)
		}
		for _, typ := range types {
			if !slices.Contains(w.Types, typ) {
				return false, fmt.Sprintf("worker %s lacks type %s", w.ID, typ)
			}
		}
	}
	return true, ""
}

// Kill simulates kill -9 of the node: its membership and remote stop without a leave (the
// others notice through failure detection, lost connections and health probes), then its
// actors stop without draining. It is idempotent.
func (n *AgentClusterNode) Kill() {
	if n.down {
		return
	}
	n.down = true
	if err := n.Membership.Shutdown(false); err != nil {
		n.t.Logf("testkit: kill: membership shutdown: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no drain
	if err := n.Node.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		n.t.Logf("testkit: kill: node stop: %v", err)
	}
	n.System.Shutdown()
}

// Stop stops the node in order: the node (agents drain until ctx ends), then a graceful leave.
// It is idempotent.
func (n *AgentClusterNode) Stop(ctx context.Context) {
	if n.down {
		return
	}
	n.down = true
	if n.Node != nil {
		if err := n.Node.Stop(ctx); err != nil {
			n.t.Errorf("testkit: stop node: %v", err)
		}
	}
	if err := n.Membership.Shutdown(true); err != nil {
		n.t.Logf("testkit: stop: membership shutdown: %v", err)
	}
	n.System.Shutdown()
}

// Down reports whether the node was killed or stopped.
func (n *AgentClusterNode) Down() bool { return n.down }
