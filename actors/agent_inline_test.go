package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// stubbornType registers typ on n: its first message is answered at once (it activates the
// agent), every later one only once release is closed, whatever its context says.
func stubbornType(t *testing.T, n *actors.Node, typ string, release <-chan struct{}, opts ...actors.AgentTypeOption) {
	t.Helper()
	var calls atomic.Int32
	if err := n.RegisterAgentType(context.Background(), typ, func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
		if calls.Add(1) > 1 {
			<-release
		}
		return []byte(`"late"`), nil
	}, opts...); err != nil {
		t.Fatal(err)
	}
	if o, err := n.SendAgent(context.Background(), aid(typ, "k"), nil, tenant("acme"), 10*time.Second); err != nil ||
		o.Status != messages.DeliveryOutcome_DELIVERED {
		t.Fatalf("activating send: %v %v", o, err)
	}
	// The answer reaches the caller before the agent's mailbox is given up: wait for that, so
	// that the next send finds the agent idle.
	testkit.Eventually(t, 10*time.Second, time.Millisecond, func() bool { return actors.AgentIdle(n, "acme", aid(typ, "k")) },
		"the activated agent idle")
}

// TestAgent_Send_inlineAnswerAfterTheDeadlineIsATimeout: a send to an idle active agent runs its
// handler on the caller's goroutine; a handler that ignores its context and answers after the
// deadline gives the caller TIMEOUT, as a late answer does on the agent's own goroutine.
func TestAgent_Send_inlineAnswerAfterTheDeadlineIsATimeout(t *testing.T) {
	n := agentNode(t, agents.Config{})
	release := make(chan struct{})
	stubbornType(t, n, "stubborn", release)
	const timeout = 100 * time.Millisecond
	before := actors.AgentInlineRuns(n)
	time.AfterFunc(timeout+50*time.Millisecond, func() { close(release) })
	start := time.Now()
	o, err := n.SendAgent(context.Background(), aid("stubborn", "k"), nil, tenant("acme"), timeout)
	if err != nil || o.Status != messages.DeliveryOutcome_TIMEOUT || agents.ReasonCode(o.Reason) != agents.ReasonDeadlineExceeded {
		t.Fatalf("late inline answer: %v %v, want TIMEOUT (deadline-exceeded)", o, err)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("the send returned after %v, before its handler did", took)
	}
	if got := actors.AgentInlineRuns(n) - before; got != 1 {
		t.Fatalf("%d sends ran on the caller's goroutine, want 1", got)
	}
	if o, err := n.SendAgent(context.Background(), aid("stubborn", "k"), nil, tenant("acme"), 10*time.Second); err != nil ||
		o.Status != messages.DeliveryOutcome_DELIVERED {
		t.Fatalf("the agent after a late answer: %v %v", o, err)
	}
}

// TestAgent_Send_onOwnGoroutineAnswersAtTheDeadline: a type registered with OnOwnGoroutine never
// runs on the caller's goroutine, so its caller gets TIMEOUT at the deadline while the handler
// still runs.
func TestAgent_Send_onOwnGoroutineAnswersAtTheDeadline(t *testing.T) {
	n := agentNode(t, agents.Config{})
	release := make(chan struct{})
	defer close(release)
	stubbornType(t, n, "stubborn", release, actors.OnOwnGoroutine())
	before := actors.AgentInlineRuns(n)
	start := time.Now()
	o, err := n.SendAgent(context.Background(), aid("stubborn", "k"), nil, tenant("acme"), 100*time.Millisecond)
	if err != nil || o.Status != messages.DeliveryOutcome_TIMEOUT {
		t.Fatalf("send to a held agent: %v %v, want TIMEOUT", o, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the send returned after %v: it waited for the handler", took)
	}
	if got := actors.AgentInlineRuns(n) - before; got != 0 {
		t.Fatalf("%d sends ran on the caller's goroutine, want 0", got)
	}
}
