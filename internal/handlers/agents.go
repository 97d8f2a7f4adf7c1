package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dairuntime/dair/internal/dag"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/messages"
)

// Names of the agent step handlers (seed 003 with pipelines).
const (
	NameAgentSend    = "agent.send"
	NameAgentPublish = "agent.publish"
)

// AgentMessenger is what agent.send and agent.publish need of the node that runs the step;
// *actors.Node implements it, and the node hands itself to each attempt through WithAgents.
// Both methods block until the outcome (or ctx ends) and are goroutine-safe.
type AgentMessenger interface {
	// SendAgentEnvelope sends env and waits for its outcome; the runtime keeps env.
	SendAgentEnvelope(ctx context.Context, env *messages.MessageEnvelope) (*messages.DeliveryOutcome, error)
	// PublishAgent publishes payload to topic under snap's tenant and returns the number of
	// deliveries the workers enqueued.
	PublishAgent(ctx context.Context, topic *messages.TopicId, payload []byte, snap *messages.ExecutionContextSnapshot) (int, error)
}

// agentsKey is the context key of the AgentMessenger.
type agentsKey struct{}

// WithAgents returns ctx carrying m, the agent runtime of the node running a step attempt.
func WithAgents(ctx context.Context, m AgentMessenger) context.Context {
	return context.WithValue(ctx, agentsKey{}, m)
}

// agentsFrom returns the AgentMessenger of ctx, or nil.
func agentsFrom(ctx context.Context) AgentMessenger {
	m, _ := ctx.Value(agentsKey{}).(AgentMessenger)
	return m
}

// AgentSend returns the agent.send handler: `with: {agent: TYPE/KEY, message: ANY, timeout: D}`
// sends message (as JSON) to the agent under the run's tenant and waits for its reply, which is
// the step's output (JSON as is, any other reply as a string). The envelope's id is the step's
// idempotency key, the same for every attempt, so an agent can recognize a retried message.
// timeout defaults to the step's remaining time, or the node's agent RPC timeout (30s).
//
// A timeout outcome fails the attempt with ErrAgentTimeout, undeliverable with
// ErrAgentUndeliverable and error with ErrAgentFailed, each with the outcome's reason; they are
// retried per the step's retry policy, except an undeliverable for the tenant (tenant-refused,
// missing-tenant), which no retry can fix.
func AgentSend() step.Handler { return step.Checked(step.HandlerFunc(runAgentSend), checkAgentSend) }

// AgentPublish returns the agent.publish handler: `with: {topic: TYPE or TYPE/SOURCE, message:
// ANY}` publishes message (as JSON) under the run's tenant; the output is {"deliveries": N}. A
// retried attempt publishes again (subscribers see at-least-once delivery).
func AgentPublish() step.Handler {
	return step.Checked(step.HandlerFunc(runAgentPublish), checkAgentPublish)
}

// checkAgentSend is agent.send's check when its pipeline is stored: only agent, message and
// timeout; agent a TYPE/KEY; timeout a positive duration. A templated value is left to the run.
func checkAgentSend(with map[string]any) (string, error) {
	if field, err := onlyFields(with, "agent", "message", "timeout"); err != nil {
		return field, err
	}
	if err := checkRef(with, "agent", "TYPE/KEY", func(s string) error { _, err := agents.ParseAgentRef(s); return err }); err != nil {
		return "agent", err
	}
	if v, ok := with["timeout"]; ok && v != nil {
		if s, isString := v.(string); !isString || !templated(s) {
			if _, err := sendTimeout(v); err != nil {
				return "timeout", err
			}
		}
	}
	return "", nil
}

// checkAgentPublish is agent.publish's check when its pipeline is stored: only topic and
// message; topic a TYPE or TYPE/SOURCE.
func checkAgentPublish(with map[string]any) (string, error) {
	if field, err := onlyFields(with, "topic", "message"); err != nil {
		return field, err
	}
	if err := checkRef(with, "topic", "TYPE or TYPE/SOURCE", func(s string) error { _, err := agents.ParseTopic(s); return err }); err != nil {
		return "topic", err
	}
	return "", nil
}

// checkRef checks the required string field of with (shaped like want) with parse, unless
// it is templated.
func checkRef(with map[string]any, field, want string, parse func(string) error) error {
	v, ok := with[field].(string)
	switch {
	case with[field] == nil:
		return fmt.Errorf("%s is required (%s)", field, want)
	case !ok:
		return fmt.Errorf("want a string %s, got %s", want, dag.KindOf(with[field]))
	case templated(v):
		return nil
	}
	return parse(v)
}

// onlyFields returns the first field of with (in sorted order) that is not one of names.
func onlyFields(with map[string]any, names ...string) (string, error) {
	var unknown []string
	for k := range with {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return "", nil
	}
	slices.Sort(unknown)
	return unknown[0], fmt.Errorf("unknown field %q (want %s)", unknown[0], strings.Join(names, ", "))
}

// templated reports whether s holds a template, whose value only a run knows.
func templated(s string) bool { return strings.Contains(s, "{{") }

func runAgentSend(ctx context.Context, req *step.Request) (step.Result, error) {
	m := agentsFrom(ctx)
	if m == nil {
		return step.Result{}, fmt.Errorf("%w: %s", ErrNoAgentRuntime, NameAgentSend)
	}
	ref, err := optString(NameAgentSend, req.With, "agent")
	if err != nil {
		return step.Result{}, err
	}
	if ref == "" {
		return step.Result{}, invalid(NameAgentSend, "agent is required (TYPE/KEY)")
	}
	id, err := agents.ParseAgentRef(ref)
	if err != nil {
		return step.Result{}, invalid(NameAgentSend, "agent: %v", err)
	}
	payload, err := json.Marshal(req.With["message"])
	if err != nil {
		return step.Result{}, invalid(NameAgentSend, "message: %v", err)
	}
	deadline, err := sendDeadline(ctx, req.With)
	if err != nil {
		return step.Result{}, err
	}
	env := &messages.MessageEnvelope{Id: req.IdempotencyKey, Recipient: id, Payload: payload, ContentType: "application/json",
		Snapshot: stepSnapshot(req), Deadline: deadline}
	o, err := m.SendAgentEnvelope(ctx, env)
	if err != nil {
		return step.Result{}, fmt.Errorf("%s %s: %w", NameAgentSend, ref, err)
	}
	return sendResult(ref, o)
}

// sendDeadline returns the envelope deadline (Unix ns; 0: the node's RPC timeout): now plus
// with.timeout, but no later than the step's own deadline.
func sendDeadline(ctx context.Context, with map[string]any) (int64, error) {
	var dl time.Time
	if v, ok := with["timeout"]; ok && v != nil {
		d, err := sendTimeout(v)
		if err != nil {
			return 0, invalid(NameAgentSend, "timeout %v", err)
		}
		dl = time.Now().Add(d)
	}
	if cdl, ok := ctx.Deadline(); ok && (dl.IsZero() || cdl.Before(dl)) {
		dl = cdl
	}
	if dl.IsZero() {
		return 0, nil
	}
	return dl.UnixNano(), nil
}

// sendTimeout parses agent.send's with.timeout: a positive duration or milliseconds.
func sendTimeout(v any) (time.Duration, error) {
	d, ok := asDuration(v)
	if !ok || d <= 0 {
		return 0, fmt.Errorf("must be a positive duration (\"2s\") or milliseconds, got %v", v)
	}
	return d, nil
}

// sendResult maps an outcome to the attempt's result.
func sendResult(ref string, o *messages.DeliveryOutcome) (step.Result, error) {
	switch o.GetStatus() {
	case messages.DeliveryOutcome_DELIVERED:
		if len(o.GetResponse()) == 0 {
			return step.Result{}, nil
		}
		if json.Valid(o.GetResponse()) {
			return step.Result{Output: json.RawMessage(o.GetResponse())}, nil
		}
		return step.Result{Output: string(o.GetResponse())}, nil
	case messages.DeliveryOutcome_TIMEOUT:
		return step.Result{}, fmt.Errorf("%w: %s: %s", ErrAgentTimeout, ref, o.GetReason())
	case messages.DeliveryOutcome_UNDELIVERABLE:
		err := fmt.Errorf("%w: %s: %s", ErrAgentUndeliverable, ref, o.GetReason())
		switch agents.ReasonCode(o.GetReason()) {
		case agents.ReasonTenantRefused, agents.ReasonMissingTenant:
			return step.Result{}, step.Permanent(err)
		}
		return step.Result{}, err
	default:
		return step.Result{}, fmt.Errorf("%w: %s: %s", ErrAgentFailed, ref, o.GetReason())
	}
}

func runAgentPublish(ctx context.Context, req *step.Request) (step.Result, error) {
	m := agentsFrom(ctx)
	if m == nil {
		return step.Result{}, fmt.Errorf("%w: %s", ErrNoAgentRuntime, NameAgentPublish)
	}
	raw, err := optString(NameAgentPublish, req.With, "topic")
	if err != nil {
		return step.Result{}, err
	}
	if raw == "" {
		return step.Result{}, invalid(NameAgentPublish, "topic is required (TYPE or TYPE/SOURCE)")
	}
	topic, err := agents.ParseTopic(raw)
	if err != nil {
		return step.Result{}, invalid(NameAgentPublish, "topic: %v", err)
	}
	payload, err := json.Marshal(req.With["message"])
	if err != nil {
		return step.Result{}, invalid(NameAgentPublish, "message: %v", err)
	}
	n, err := m.PublishAgent(ctx, topic, payload, stepSnapshot(req))
	if err != nil {
		if errors.Is(err, agents.ErrInvalidTopic) {
			return step.Result{}, invalid(NameAgentPublish, "%v", err)
		}
		return step.Result{}, fmt.Errorf("%s %s: %w", NameAgentPublish, raw, err)
	}
	return step.Result{Output: map[string]any{"deliveries": n}}, nil
}

// stepSnapshot returns a copy of the run's tenant context (the agent runtime keeps it past the
// attempt), or one naming only the request's tenant.
func stepSnapshot(req *step.Request) *messages.ExecutionContextSnapshot {
	if req.Snapshot != nil && req.Snapshot.TenantId != "" {
		return proto.Clone(req.Snapshot).(*messages.ExecutionContextSnapshot)
	}
	return &messages.ExecutionContextSnapshot{TenantId: req.TenantID}
}
