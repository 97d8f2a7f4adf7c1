package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

func tenant(id string) *messages.ExecutionContextSnapshot {
	return &messages.ExecutionContextSnapshot{TenantId: id}
}

func aid(typ, key string) *messages.AgentId { return &messages.AgentId{Type: typ, Key: key} }

// agentNode starts a single node owning echo and counter.
func agentNode(t *testing.T, knobs agents.Config) *actors.Node {
	t.Helper()
	return testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{Roles: []string{actors.RoleRuntime},
		AgentTypes: []string{actors.AgentEcho, actors.AgentCounter}, Agents: knobs}})
}

// outcomeNode starts an agent node with the types the outcome tests send to: "fail" (an error,
// or a panic for the payload "panic"), "private" (only tenant globex may reach it) and the
// probe "silent" (which answers only when told to).
func outcomeNode(t *testing.T) (*actors.Node, *testkit.AgentProbe) {
	t.Helper()
	n := agentNode(t, agents.Config{})
	ctx := context.Background()
	if err := n.RegisterAgentType(ctx, "fail", func(_ context.Context, _ *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		if string(env.Payload) == "panic" {
			panic("boom")
		}
		return nil, errors.New("no luck")
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.RegisterAgentType(ctx, "private", func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
		return []byte("ok"), nil
	}, actors.ForTenants("globex")); err != nil {
		t.Fatal(err)
	}
	probe := testkit.NewAgentProbe(t, "silent", []*actors.Node{n})
	return n, probe
}

func TestAgent_Send_outcomesOnOneNode(t *testing.T) {
	n, probe := outcomeNode(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		id      *messages.AgentId
		snap    *messages.ExecutionContextSnapshot
		payload string
		timeout time.Duration
		status  messages.DeliveryOutcome_Status
		code    string
		resp    string
	}{
		{"echo replies with the payload", aid("echo", "k"), tenant("acme"), `{"a":1}`, 0, messages.DeliveryOutcome_DELIVERED, "", `{"a":1}`},
		{"counter counts per key", aid("counter", "k1"), tenant("acme"), "", 0, messages.DeliveryOutcome_DELIVERED, "", `{"count":1}`},
		{"counter counts again", aid("counter", "k1"), tenant("acme"), "", 0, messages.DeliveryOutcome_DELIVERED, "", `{"count":2}`},
		{"another tenant's counter is another agent", aid("counter", "k1"), tenant("globex"), "", 0, messages.DeliveryOutcome_DELIVERED, "", `{"count":1}`},
		{"no owner", aid("nobody", "k"), tenant("acme"), "", 0, messages.DeliveryOutcome_UNDELIVERABLE, agents.ReasonNoLiveOwner, ""},
		{"no tenant", aid("echo", "k"), nil, "", 0, messages.DeliveryOutcome_UNDELIVERABLE, agents.ReasonMissingTenant, ""},
		{"cross-tenant refused", aid("private", "k"), tenant("acme"), "", 0, messages.DeliveryOutcome_UNDELIVERABLE, agents.ReasonTenantRefused, ""},
		{"own tenant served", aid("private", "k"), tenant("globex"), "", 0, messages.DeliveryOutcome_DELIVERED, "", "ok"},
		{"handler error", aid("fail", "k"), tenant("acme"), "x", 0, messages.DeliveryOutcome_ERROR, "", ""},
		{"handler panic", aid("fail", "k"), tenant("acme"), "panic", 0, messages.DeliveryOutcome_ERROR, agents.ReasonAgentPanicked, ""},
		{"the agent goes on after a panic", aid("fail", "k"), tenant("acme"), "x", 0, messages.DeliveryOutcome_ERROR, "", ""},
		{"deadline passes", aid("silent", "k"), tenant("acme"), "", 100 * time.Millisecond, messages.DeliveryOutcome_TIMEOUT, agents.ReasonDeadlineExceeded, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := n.SendAgent(ctx, tt.id, []byte(tt.payload), tt.snap, tt.timeout)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != tt.status || agents.ReasonCode(o.Reason) != tt.code || tt.resp != "" && string(o.Response) != tt.resp {
				t.Fatalf("outcome %v, want %v %q %s", o, tt.status, tt.code, tt.resp)
			}
		})
	}
	probe.Expect().Reply(nil) // the timed-out message reached the probe; its late answer is dropped
	if o, err := n.SendAgent(ctx, aid("fail", "k"), []byte("x"), tenant("acme"), 0); err != nil || o.Reason != "no luck" {
		t.Fatalf("error outcome %v, %v: want the handler's message", o, err)
	}
	for _, bad := range []*messages.AgentId{nil, aid("", "k"), aid("echo", ""), aid("Echo", "k")} {
		if _, err := n.SendAgent(ctx, bad, nil, tenant("acme"), 0); !errors.Is(err, agents.ErrInvalidAgentID) {
			t.Errorf("SendAgent(%v) error = %v, want ErrInvalidAgentID", bad, err)
		}
	}
	for _, bad := range []string{"ba/d", "has space", "Acme"} { // a tenant id as a run's
		if _, err := n.SendAgent(ctx, aid("echo", "k"), nil, tenant(bad), 0); !errors.Is(err, agents.ErrInvalidTenant) {
			t.Errorf("SendAgent(tenant %q) error = %v, want ErrInvalidTenant", bad, err)
		}
		env := &messages.MessageEnvelope{Recipient: aid("echo", "k"), Snapshot: tenant(bad)}
		if _, err := n.SendAgentBatch(ctx, []*messages.MessageEnvelope{env}); !errors.Is(err, agents.ErrInvalidTenant) {
			t.Errorf("SendAgentBatch(tenant %q) error = %v, want ErrInvalidTenant", bad, err)
		}
	}
	if _, err := n.SendAgentEnvelope(ctx, nil); err == nil {
		t.Error("SendAgentEnvelope(nil) succeeded")
	}
}

func TestAgent_Send_oneMessageAtATimePerAgentOthersInParallel(t *testing.T) {
	n := agentNode(t, agents.Config{})
	probe := testkit.NewAgentProbe(t, "probe", []*actors.Node{n})
	ctx := context.Background()
	results := make(chan *messages.DeliveryOutcome, 3)
	var wg sync.WaitGroup
	send := func(key, payload string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := n.SendAgent(ctx, aid("probe", key), []byte(payload), tenant("acme"), 10*time.Second)
			if err != nil {
				o = agents.Failed(err.Error(), "")
			}
			results <- o
		}()
	}
	defer wg.Wait()
	send("a", "a1")
	first := probe.Expect()
	send("a", "a2") // queued behind a1 on agent a
	send("b", "b1") // another agent: runs at once
	if c := probe.Expect(); string(c.Env.Payload) != "b1" {
		t.Fatalf("got %s while a1 is held, want b1", c.Env.Payload)
	} else {
		c.Reply([]byte("B1"))
	}
	probe.ExpectNone(100 * time.Millisecond) // a2 waits for a1
	first.Reply([]byte("A1"))
	if c := probe.Expect(); string(c.Env.Payload) != "a2" {
		t.Fatalf("got %s, want a2", c.Env.Payload)
	} else {
		c.Reply([]byte("A2"))
	}
	var got []string
	for range 3 {
		got = append(got, string((<-results).Response))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"A1", "A2", "B1"}) {
		t.Fatalf("replies %v", got)
	}
}

func TestAgent_Send_orderPerSenderUnderConcurrentSenders(t *testing.T) {
	n := agentNode(t, agents.Config{})
	const senders, each = 8, 200
	counts := make([][]int, senders)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				o, err := n.SendAgent(context.Background(), aid("counter", "shared"), nil, tenant("acme"), 10*time.Second)
				var c int
				if err == nil && o.Status == messages.DeliveryOutcome_DELIVERED {
					_, err = fmt.Sscanf(string(o.Response), `{"count":%d}`, &c)
				}
				if err != nil {
					c = -1
				}
				counts[s] = append(counts[s], c)
			}
		}()
	}
	wg.Wait()
	if actors.AgentInlineRuns(n) == 0 {
		t.Fatal("no send ran on its caller's goroutine: the test no longer mixes inline and mailbox runs")
	}
	var all []int
	for s, cs := range counts {
		if !slices.IsSorted(cs) || slices.Contains(cs, -1) {
			t.Fatalf("sender %d saw counts out of order or failed: %v", s, cs)
		}
		all = append(all, cs...)
	}
	slices.Sort(all)
	for i, c := range all {
		if c != i+1 {
			t.Fatalf("counts are not 1..%d: position %d holds %d", senders*each, i, c)
		}
	}
}

func TestAgent_Publish_exactPrefixAndSourceMapping(t *testing.T) {
	n := agentNode(t, agents.Config{})
	probe := testkit.NewAgentProbe(t, "sub", []*actors.Node{n})
	probe.AutoReply(func(*testkit.AgentCall) ([]byte, error) { return nil, nil })
	ctx := context.Background()
	ids, err := n.Subscribe(ctx,
		&messages.Subscription{TenantId: "acme", Topic: "orders", AgentType: "counter"},                          // key = topic source
		&messages.Subscription{TenantId: "acme", TopicPrefix: "orders", AgentType: "counter", AgentKey: "audit"}, // fixed key
		&messages.Subscription{TenantId: "globex", Topic: "orders", AgentType: "counter", AgentKey: "theirs"})
	if err != nil || len(ids) != 3 {
		t.Fatalf("Subscribe = %v, %v", ids, err)
	}
	publish := func(typ, source, ten string) int {
		t.Helper()
		d, err := n.PublishAgent(ctx, &messages.TopicId{Type: typ, Source: source}, []byte(`{}`), tenant(ten))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := publish("orders", "o-1", "acme"); d != 2 {
		t.Fatalf("orders/o-1 delivered %d, want 2 (o-1 and audit)", d)
	}
	if d := publish("orders.eu", "o-2", "acme"); d != 1 {
		t.Fatalf("orders.eu delivered %d, want 1 (audit by prefix)", d)
	}
	if d := publish("billing", "x", "acme"); d != 0 {
		t.Fatalf("billing delivered %d", d)
	}
	counts := map[string]string{"o-1": `{"count":2}`, "audit": `{"count":3}`, "o-2": `{"count":1}`}
	for key, want := range counts {
		o, err := n.SendAgent(ctx, aid("counter", key), nil, tenant("acme"), 0)
		if err != nil || string(o.Response) != want {
			t.Errorf("counter %s = %v, %v; want %s", key, o, err, want)
		}
	}
	if o, _ := n.SendAgent(ctx, aid("counter", "theirs"), nil, tenant("globex"), 0); string(o.GetResponse()) != `{"count":1}` {
		t.Errorf("globex's subscriber got acme's publishes: %v", o)
	}
	if err := n.Unsubscribe(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if d := publish("orders.eu", "o-3", "acme"); d != 0 {
		t.Fatalf("after unsubscribe: %d", d)
	}
	if _, err := n.PublishAgent(ctx, &messages.TopicId{Type: "orders"}, nil, nil); !errors.Is(err, agents.ErrNoTenant) {
		t.Fatalf("publish without tenant: %v", err)
	}
	if _, err := n.PublishAgent(ctx, &messages.TopicId{Type: "orders"}, nil, tenant("ac/me")); !errors.Is(err, agents.ErrInvalidTenant) {
		t.Fatalf("publish with an invalid tenant: %v", err)
	}
	if _, err := n.Subscribe(ctx, &messages.Subscription{TenantId: "acme", AgentType: "counter"}); !errors.Is(err, agents.ErrInvalidSubscription) {
		t.Fatalf("subscribe without topic: %v", err)
	}
}

func TestAgent_passivation_keepsStateAndFreesTheActor(t *testing.T) {
	n := agentNode(t, agents.Config{IdleTimeout: 40 * time.Millisecond})
	ctx := context.Background()
	if o, err := n.SendAgent(ctx, aid("counter", "k"), nil, tenant("acme"), 0); err != nil || string(o.Response) != `{"count":1}` {
		t.Fatalf("first count: %v %v", o, err)
	}
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
		d, err := n.AgentDirectory(ctx)
		return err == nil && d.Workers[0].ActiveAgents == 0
	}, "the idle agent is passivated")
	if o, err := n.SendAgent(ctx, aid("counter", "k"), nil, tenant("acme"), 0); err != nil || string(o.Response) != `{"count":2}` {
		t.Fatalf("count after passivation: %v %v", o, err)
	}
}

func TestAgent_RegisterAgentType_errors(t *testing.T) {
	n := agentNode(t, agents.Config{})
	ctx := context.Background()
	h := func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) { return nil, nil }
	if err := n.RegisterAgentType(ctx, actors.AgentEcho, h); !errors.Is(err, actors.ErrAgentTypeExists) {
		t.Errorf("duplicate: %v", err)
	}
	if err := n.RegisterAgentType(ctx, "Bad Name", h); !errors.Is(err, agents.ErrInvalidAgentID) {
		t.Errorf("bad name: %v", err)
	}
	if err := n.RegisterAgentType(ctx, "nil", nil); err == nil {
		t.Error("nil handler accepted")
	}
	_, err := actors.Start(ctx, actors.Config{Store: testkit.OpenStore(t, testkit.BackendEmbedded, nil), AgentTypes: []string{"telepathy"}})
	if !errors.Is(err, actors.ErrUnknownBuiltinAgent) {
		t.Errorf("unknown built-in: %v", err)
	}
}
