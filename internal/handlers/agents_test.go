package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/messages"
)

// fakeAgents records the last envelope or publish and answers with a fixed outcome.
type fakeAgents struct {
	outcome *messages.DeliveryOutcome
	err     error
	env     *messages.MessageEnvelope
	topic   *messages.TopicId
	payload []byte
	snap    *messages.ExecutionContextSnapshot
	n       int
}

func (f *fakeAgents) SendAgentEnvelope(_ context.Context, env *messages.MessageEnvelope) (*messages.DeliveryOutcome, error) {
	f.env = env
	return f.outcome, f.err
}

func (f *fakeAgents) PublishAgent(_ context.Context, t *messages.TopicId, p []byte, s *messages.ExecutionContextSnapshot) (int, error) {
	f.topic, f.payload, f.snap = t, p, s
	return f.n, f.err
}

func agentReq(with map[string]any) *step.Request {
	return &step.Request{ExecutionID: "e1", StepID: "s1", TenantID: "acme", Attempt: 2, IdempotencyKey: "e1/s1", With: with,
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme", UserId: "u"}}
}

func TestAgentSend_Run_outcomes(t *testing.T) {
	tests := []struct {
		name      string
		outcome   *messages.DeliveryOutcome
		output    string // JSON of the output on success
		is        error
		permanent bool
	}{
		{"delivered json", agents.Delivered([]byte(`{"count":3}`), "application/json", "w1"), `{"count":3}`, nil, false},
		{"delivered text", agents.Delivered([]byte("hi there"), "text/plain", "w1"), `"hi there"`, nil, false},
		{"delivered empty", agents.Delivered(nil, "", "w1"), `null`, nil, false},
		{"timeout", agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "late"), "w1"), "", ErrAgentTimeout, false},
		{"evicted", agents.Undeliverable(agents.Reason(agents.ReasonWorkerEvicted, "gone"), "w1"), "", ErrAgentUndeliverable, false},
		{"no owner", agents.Undeliverable(agents.Reason(agents.ReasonNoLiveOwner, "none"), ""), "", ErrAgentUndeliverable, false},
		{"tenant refused", agents.Undeliverable(agents.Reason(agents.ReasonTenantRefused, "no"), "w1"), "", ErrAgentUndeliverable, true},
		{"error", agents.Failed("boom", "w1"), "", ErrAgentFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAgents{outcome: tt.outcome}
			ctx := WithAgents(context.Background(), f)
			res, err := AgentSend().Run(ctx, agentReq(map[string]any{"agent": "counter/k/1", "message": map[string]any{"a": 1}}))
			if tt.is != nil {
				if !errors.Is(err, tt.is) || step.IsPermanent(err) != tt.permanent {
					t.Fatalf("err = %v (permanent %t), want %v (permanent %t)", err, step.IsPermanent(err), tt.is, tt.permanent)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			b, err := json.Marshal(res.Output)
			if err != nil || string(b) != tt.output {
				t.Fatalf("output = %s (%v), want %s", b, err, tt.output)
			}
			env := f.env
			if env.Id != "e1/s1" || env.Recipient.Type != "counter" || env.Recipient.Key != "k/1" || string(env.Payload) != `{"a":1}` ||
				env.ContentType != "application/json" || env.Snapshot.TenantId != "acme" || env.Deadline != 0 {
				t.Fatalf("envelope = %v", env)
			}
		})
	}
}

func TestAgentSend_Run_deadline(t *testing.T) {
	f := &fakeAgents{outcome: agents.Delivered(nil, "", "w")}
	ctx := WithAgents(context.Background(), f)
	before := time.Now()
	if _, err := AgentSend().Run(ctx, agentReq(map[string]any{"agent": "echo/k", "timeout": "2s"})); err != nil {
		t.Fatal(err)
	}
	if d := time.Unix(0, f.env.Deadline).Sub(before); d < 2*time.Second || d > 3*time.Second {
		t.Fatalf("deadline in %v, want about 2s", d)
	}
	if string(f.env.Payload) != "null" {
		t.Fatalf("payload of a missing message = %s, want null", f.env.Payload)
	}
	// The step's own deadline bounds the send's.
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := AgentSend().Run(sctx, agentReq(map[string]any{"agent": "echo/k", "timeout": 5000})); err != nil {
		t.Fatal(err)
	}
	if d := time.Unix(0, f.env.Deadline).Sub(before); d > time.Second {
		t.Fatalf("deadline in %v, want the step's (100ms)", d)
	}
}

func TestAgentSend_Run_badInput(t *testing.T) {
	ctx := WithAgents(context.Background(), &fakeAgents{})
	for name, with := range map[string]map[string]any{
		"no agent":      {},
		"agent not str": {"agent": 3},
		"no key":        {"agent": "echo"},
		"bad type":      {"agent": "Echo/k"},
		"bad timeout":   {"agent": "echo/k", "timeout": "soon"},
		"zero timeout":  {"agent": "echo/k", "timeout": "0s"},
		"bad message":   {"agent": "echo/k", "message": func() {}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := AgentSend().Run(ctx, agentReq(with))
			if !errors.Is(err, ErrInvalidArgument) || !step.IsPermanent(err) {
				t.Fatalf("err = %v, want permanent ErrInvalidArgument", err)
			}
		})
	}
}

func TestAgentHandlers_Run_withoutRuntime(t *testing.T) {
	for _, h := range []step.Handler{AgentSend(), AgentPublish()} {
		_, err := h.Run(context.Background(), agentReq(map[string]any{"agent": "echo/k", "topic": "t"}))
		if !errors.Is(err, ErrNoAgentRuntime) || step.IsPermanent(err) {
			t.Fatalf("err = %v, want retryable ErrNoAgentRuntime", err)
		}
	}
}

func TestAgentPublish_Run(t *testing.T) {
	f := &fakeAgents{n: 3}
	ctx := WithAgents(context.Background(), f)
	res, err := AgentPublish().Run(ctx, agentReq(map[string]any{"topic": "orders.created/o-1", "message": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := json.Marshal(res.Output); err != nil || string(b) != `{"deliveries":3}` {
		t.Fatalf("output = %s (%v)", b, err)
	}
	if f.topic.Type != "orders.created" || f.topic.Source != "o-1" || string(f.payload) != `"hi"` || f.snap.TenantId != "acme" {
		t.Fatalf("published %v %s %v", f.topic, f.payload, f.snap)
	}

	f.err = errors.New("stopping")
	if _, err := AgentPublish().Run(ctx, agentReq(map[string]any{"topic": "t"})); err == nil || step.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	for name, with := range map[string]map[string]any{"no topic": {}, "bad topic": {"topic": "/src"}, "topic not str": {"topic": 1}} {
		if _, err := AgentPublish().Run(ctx, agentReq(with)); !errors.Is(err, ErrInvalidArgument) || !step.IsPermanent(err) {
			t.Fatalf("%s: err = %v, want permanent ErrInvalidArgument", name, err)
		}
	}
}

func TestStepSnapshot_fallsBackToTheRequestTenant(t *testing.T) {
	s := stepSnapshot(&step.Request{TenantID: "acme"})
	if s.TenantId != "acme" {
		t.Fatalf("snapshot = %v", s)
	}
	orig := &messages.ExecutionContextSnapshot{TenantId: "t", UserId: "u"}
	c := stepSnapshot(&step.Request{Snapshot: orig})
	if c == orig || c.UserId != "u" {
		t.Fatalf("want a copy of the run's snapshot, got %v", c)
	}
}

// The registry's check of agent.send and agent.publish when a pipeline is stored: one row per
// rule; a templated value passes.
func TestAgentHandlers_CheckWith(t *testing.T) {
	reg := step.NewRegistry()
	if err := Register(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, uses string
		with       map[string]any
		field      string // "" = accepted
	}{
		{"send", NameAgentSend, map[string]any{"agent": "echo/k", "message": 1, "timeout": "2s"}, ""},
		{"send templated agent", NameAgentSend, map[string]any{"agent": "echo/{{ .input.k }}"}, ""},
		{"send templated timeout", NameAgentSend, map[string]any{"agent": "echo/k", "timeout": "{{ .input.t }}"}, ""},
		{"send timeout in ms", NameAgentSend, map[string]any{"agent": "echo/k", "timeout": 1500}, ""},
		{"send without agent", NameAgentSend, map[string]any{"message": 1}, "agent"},
		{"send agent not a ref", NameAgentSend, map[string]any{"agent": "counterx"}, "agent"},
		{"send agent bad type", NameAgentSend, map[string]any{"agent": "Echo/k"}, "agent"},
		{"send agent not a string", NameAgentSend, map[string]any{"agent": 7}, "agent"},
		{"send bad timeout", NameAgentSend, map[string]any{"agent": "echo/k", "timeout": "abc"}, "timeout"},
		{"send negative timeout", NameAgentSend, map[string]any{"agent": "echo/k", "timeout": "-1s"}, "timeout"},
		{"send unknown field", NameAgentSend, map[string]any{"agent": "echo/k", "bogus": 1}, "bogus"},
		{"publish", NameAgentPublish, map[string]any{"topic": "orders/eu", "message": 1}, ""},
		{"publish templated topic", NameAgentPublish, map[string]any{"topic": "{{ .input.topic }}"}, ""},
		{"publish without topic", NameAgentPublish, map[string]any{"message": 1}, "topic"},
		{"publish bad topic", NameAgentPublish, map[string]any{"topic": "bad topic"}, "topic"},
		{"publish unknown field", NameAgentPublish, map[string]any{"topic": "t", "agent": "echo/k"}, "agent"},
		{"another handler is not checked", NameEcho, map[string]any{"bogus": 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			field, err := reg.CheckWith(tt.uses, tt.with)
			if field != tt.field || (err != nil) != (tt.field != "") {
				t.Fatalf("CheckWith = %q, %v; want field %q", field, err, tt.field)
			}
		})
	}
}
