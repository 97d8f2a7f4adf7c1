package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

const agentStepsPipeline = `
key: agent-steps
steps:
  - id: ask
    uses: agent.send
    with: {agent: "flaky/{{ .input.key }}", message: {from: "{{ .execution_id }}"}, timeout: 5s}
    retry: {max_attempts: 3, backoff: 10ms}
  - id: tell
    uses: agent.publish
    needs: [ask]
    with: {topic: "orders.created/{{ .input.key }}", message: {seen: "{{ .steps.ask.output.calls }}"}}
  - id: count
    uses: agent.send
    needs: [tell]
    with: {agent: "counter/{{ .input.key }}", message: 1}
`

// TestAgentSteps_Pipeline_sendRetriesPublishDelivers: agent.send fails on the flaky agent's
// first message (an error outcome) and succeeds on the retry, with the same envelope id;
// agent.publish reaches the counter subscribed to orders.*; the run's tenant scopes both.
func TestAgentSteps_Pipeline_sendRetriesPublishDelivers(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{AgentTypes: []string{actors.AgentCounter}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var calls atomic.Int32
	ids := make(chan string, 4)
	flaky := func(_ context.Context, a *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		ids <- env.Id
		if calls.Add(1) == 1 {
			return nil, errors.New("not yet")
		}
		return json.Marshal(map[string]any{"calls": calls.Load(), "tenant": a.Tenant()})
	}
	if err := n.RegisterAgentType(ctx, "flaky", flaky); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Subscribe(ctx, &messages.Subscription{TenantId: "acme", TopicPrefix: "orders.", AgentType: actors.AgentCounter}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PutPipeline(ctx, []byte(agentStepsPipeline)); err != nil {
		t.Fatal(err)
	}
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "agent-steps", Input: json.RawMessage(`{"key":"k1"}`),
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := n.Await(ctx, run.SharedRunId)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != messages.RunSucceeded {
		t.Fatalf("run %s: %s", done.Status, done.FailureReason)
	}
	steps, err := n.RunSteps(ctx, done)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range steps {
		out[s.StepId] = string(s.Output)
		if s.StepId == "ask" && s.Attempts != 2 {
			t.Fatalf("ask took %d attempts, want 2", s.Attempts)
		}
	}
	if out["ask"] != `{"calls":2,"tenant":"acme"}` || out["tell"] != `{"deliveries":1}` || out["count"] != `{"count":2}` {
		t.Fatalf("outputs %v", out)
	}
	first, second := <-ids, <-ids
	if first != second || !strings.HasSuffix(first, "/ask") {
		t.Fatalf("envelope ids %q and %q: want the step's idempotency key on both attempts", first, second)
	}
}

// TestAgentSteps_Pipeline_tenantRefusedIsPermanent: a send the run's tenant may not make fails
// the step at once, whatever its retry policy.
func TestAgentSteps_Pipeline_tenantRefusedIsPermanent(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	echo := func(_ context.Context, _ *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		return env.Payload, nil
	}
	if err := n.RegisterAgentType(ctx, "vault", echo, actors.ForTenants("acme")); err != nil {
		t.Fatal(err)
	}
	src := "key: peek\nsteps:\n  - id: s\n    uses: agent.send\n    with: {agent: vault/k, message: 1}\n    retry: {max_attempts: 5, backoff: 10ms}\n"
	if _, err := n.PutPipeline(ctx, []byte(src)); err != nil {
		t.Fatal(err)
	}
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "peek", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := n.Await(ctx, run.SharedRunId)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := n.RunSteps(ctx, done)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != messages.RunFailed || len(steps) != 1 || steps[0].Attempts != 1 || !strings.Contains(steps[0].Error, "tenant-refused") {
		t.Fatalf("run %s (%s), steps %v: want failed after one attempt, tenant-refused", done.Status, done.FailureReason, steps)
	}
}
