package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/messages"
)

// Agent messaging (seed 003) on the node's actor runtime. Every node runs an agent router and an
// agent worker (agent_runtime.go): the worker hosts the agent types registered on the node, each
// AgentId (under its tenant) as a child actor with its own mailbox; the router places agents on
// the live owners of their type, keeps the pending sessions of its callers' sends, resolves
// publishes once and probes the workers' health. The methods below are the Go library API; they
// behave the same on a single node and in a cluster.

// Errors of the agent API.
var (
	// ErrAgentsStopped is returned by RegisterAgentType and Subscribe once the node's agent
	// runtime is stopping.
	ErrAgentsStopped = errors.New("actors: agent runtime stopped")
	// ErrAgentTypeExists is returned by RegisterAgentType for a type already registered here.
	ErrAgentTypeExists = errors.New("actors: agent type already registered")
	// ErrUnknownBuiltinAgent is returned by Start for a Config.AgentTypes entry that names no
	// built-in agent type.
	ErrUnknownBuiltinAgent = errors.New("actors: unknown built-in agent type")
)

// Built-in agent types (Config.AgentTypes, `--agents`).
const (
	// AgentEcho replies with the payload it got.
	AgentEcho = "echo"
	// AgentCounter keeps a count per agent (tenant, key) and replies {"count": N} after
	// incrementing it.
	AgentCounter = "counter"
)

// AgentHandler handles one message for one agent. It runs on the agent's own actor: one message
// at a time per agent, in arrival order, while different agents run in parallel. ctx ends at the
// envelope's deadline or when the node stops. The returned bytes are the reply (content type:
// the request's, unless Agent.SetContentType changes it); an error becomes an ERROR outcome with
// its message, and so does a panic. Handlers must not modify env. A handler that sends to an
// agent which sends back to it waits for itself until the deadline.
//
// When a local SendAgent finds its agent active and idle, the handler runs on the caller's
// goroutine (the caller waits for its answer anyway; no goroutine is woken twice). The
// deadline then holds through ctx: a handler that ignores ctx keeps such a caller waiting past
// the deadline, and its answer is still reported as TIMEOUT. Register a type with OnOwnGoroutine
// when its handler may ignore ctx and callers must get their answer at the deadline.
type AgentHandler func(ctx context.Context, a *Agent, env *messages.MessageEnvelope) ([]byte, error)

// AgentTypeOption configures RegisterAgentType.
type AgentTypeOption func(*agentTypeSpec)

// ForTenants restricts an agent type to the given tenants: messages of other tenants are
// UNDELIVERABLE (tenant-refused). Without it a type serves every tenant (each tenant's agents
// being distinct). Register a type with the same options on every node that owns it.
func ForTenants(tenants ...string) AgentTypeOption {
	return func(s *agentTypeSpec) { s.tenants = append([]string(nil), tenants...) }
}

// OnOwnGoroutine makes every message of an agent type run on its agent's mailbox goroutine,
// never on a local caller's (see AgentHandler): a caller then always gets its outcome at the
// deadline, whatever the handler does, for the cost of two goroutine wake-ups per send.
func OnOwnGoroutine() AgentTypeOption {
	return func(s *agentTypeSpec) { s.ownGoroutine = true }
}

// NonBlocking declares that an agent type's handler never blocks: no I/O, no waiting for other
// agents, locks or timers, so it answers in microseconds. A message delivered through the
// node's worker (from another node, or a local send that activates its agent) then runs on the
// worker's goroutine when its agent is idle, instead of waking the agent's: one goroutine
// hand-off less per message. The agent still handles one message at a time, in order. A handler
// that blocks stalls every delivery of the node meanwhile: do not use it for one. The built-in
// types (echo, counter) are non-blocking. OnOwnGoroutine overrides it.
func NonBlocking() AgentTypeOption {
	return func(s *agentTypeSpec) { s.nonBlocking = true }
}

// agentTypeSpec is one registered agent type.
type agentTypeSpec struct {
	name    string
	handler AgentHandler
	tenants []string
	// ownGoroutine: never run on a caller's goroutine (OnOwnGoroutine).
	ownGoroutine bool
	// nonBlocking: may run on the worker's goroutine (NonBlocking).
	nonBlocking bool
}

// onWorker reports whether a delivery of the type may run on the worker's goroutine.
func (s *agentTypeSpec) onWorker() bool { return s.nonBlocking && !s.ownGoroutine }

// Agent is the running agent a handler works for: its id, its tenant and its state. It is owned
// by the agent's actor; use it only inside the handler call.
type Agent struct {
	id          *messages.AgentId
	tenant      string
	state       any
	contentType string
	node        *Node
}

// ID returns the agent's id. The caller must not modify it.
func (a *Agent) ID() *messages.AgentId { return a.id }

// Tenant returns the tenant the agent belongs to.
func (a *Agent) Tenant() string { return a.tenant }

// State returns the agent's state: nil at first, then what SetState stored. The state lives in
// the node's memory and survives passivation, not the loss of the node (nor a move of the key to
// another owner).
func (a *Agent) State() any { return a.state }

// SetState replaces the agent's state; nil forgets it.
func (a *Agent) SetState(v any) { a.state = v }

// SetContentType sets the content type of the reply being built.
func (a *Agent) SetContentType(ct string) { a.contentType = ct }

// Node returns the node hosting the agent, to send or publish from a handler.
func (a *Agent) Node() *Node { return a.node }

// builtinAgents are the agent types Config.AgentTypes can name.
var builtinAgents = map[string]AgentHandler{
	AgentEcho: func(_ context.Context, _ *Agent, env *messages.MessageEnvelope) ([]byte, error) {
		return env.Payload, nil
	},
	AgentCounter: func(_ context.Context, a *Agent, _ *messages.MessageEnvelope) ([]byte, error) {
		n, _ := a.State().(int64)
		n++
		a.SetState(n)
		a.SetContentType("application/json")
		return json.Marshal(struct {
			Count int64 `json:"count"`
		}{n})
	},
}

// RegisterAgentType makes this node an owner of agent type name, with handler h. It blocks until
// the routers of the cluster know it (or ctx ends; they learn it from gossip and probes then).
// It is goroutine-safe. It fails for an invalid name (agents.ErrInvalidAgentID), a name already
// registered here (ErrAgentTypeExists) or a stopping runtime (ErrAgentsStopped).
func (n *Node) RegisterAgentType(ctx context.Context, name string, h AgentHandler, opts ...AgentTypeOption) error {
	if err := agents.ValidateType(name); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("actors: register agent type %s: nil handler", name)
	}
	spec := &agentTypeSpec{name: name, handler: h}
	for _, o := range opts {
		o(spec)
	}
	return n.agents.registerType(ctx, spec)
}

// SendAgent sends payload (content type application/json) to agent id under the tenant of snap
// and waits for the outcome: DELIVERED with the agent's reply, TIMEOUT when timeout (≤0: the RPC
// timeout, 30 s by default) passes first (noticed within deadlineTick, 5 ms), UNDELIVERABLE (no live owner, owner evicted while
// pending, tenant refused, node stopping) or ERROR (the handler failed). The reason of a
// non-delivered outcome is "<code>: <detail>" (agents.ReasonCode). The error is non-nil only for
// invalid input (an invalid recipient, a tenant id no tenant can have: agents.ErrInvalidTenant)
// or when ctx ends. It is goroutine-safe; the caller owns the outcome.
func (n *Node) SendAgent(ctx context.Context, id *messages.AgentId, payload []byte, snap *messages.ExecutionContextSnapshot,
	timeout time.Duration) (*messages.DeliveryOutcome, error) {
	env := &messages.MessageEnvelope{Recipient: id, Payload: payload, ContentType: "application/json", Snapshot: snap}
	if timeout > 0 {
		env.Deadline = time.Now().Add(timeout).UnixNano()
	}
	return n.SendAgentEnvelope(ctx, env)
}

// SendAgentEnvelope is SendAgent with a caller-built envelope (sender, content type, id,
// deadline: zero means the RPC timeout). The runtime keeps env: the caller must not modify it
// afterwards.
func (n *Node) SendAgentEnvelope(ctx context.Context, env *messages.MessageEnvelope) (*messages.DeliveryOutcome, error) {
	if env == nil {
		return nil, fmt.Errorf("actors: send agent: nil envelope")
	}
	if err := agents.ValidateAgentID(env.Recipient); err != nil {
		return nil, fmt.Errorf("actors: send agent: %w", err)
	}
	if err := agents.ValidateTenant(env.GetSnapshot().GetTenantId()); errors.Is(err, agents.ErrInvalidTenant) {
		return nil, fmt.Errorf("actors: send agent: %w", err) // no tenant at all is an undeliverable outcome
	}
	if n.agents == nil {
		return nil, ErrAgentsStopped
	}
	if env.Id == "" {
		env.Id = n.agents.messageID()
	}
	return n.agents.send(ctx, env)
}

// SendAgentBatch sends every envelope of envs (each as SendAgentEnvelope would: its own
// recipient, tenant, deadline, id) and waits for all their outcomes; outcomes[i] is envs[i]'s,
// with the same statuses and reasons as a single send. The envelopes are routed together: those
// to this node's agents in one message per agent, those to other nodes in one request per
// destination worker. The envelopes to one agent (same tenant, type and key) are handled in
// their order in envs; a batch is not atomic (each envelope has its own outcome). An envelope
// whose deadline is zero gets the RPC timeout; ctx's deadline bounds all. The error is non-nil,
// and nothing is sent, for invalid input (a nil envelope, an invalid recipient); it is ctx's
// error when ctx is cancelled before every outcome came (the deliveries may still happen). An
// expired ctx gives the envelopes still pending TIMEOUT. It is goroutine-safe; the runtime keeps
// envs' envelopes (do not modify them afterwards) and the caller owns the returned slice and
// outcomes.
func (n *Node) SendAgentBatch(ctx context.Context, envs []*messages.MessageEnvelope) ([]*messages.DeliveryOutcome, error) {
	for i, env := range envs {
		if env == nil {
			return nil, fmt.Errorf("actors: send agent batch: envelope %d: nil envelope", i)
		}
		if err := agents.ValidateAgentID(env.Recipient); err != nil {
			return nil, fmt.Errorf("actors: send agent batch: envelope %d: %w", i, err)
		}
		if err := agents.ValidateTenant(env.GetSnapshot().GetTenantId()); errors.Is(err, agents.ErrInvalidTenant) {
			return nil, fmt.Errorf("actors: send agent batch: envelope %d: %w", i, err)
		}
	}
	if n.agents == nil {
		return nil, ErrAgentsStopped
	}
	n.agents.assignIDs(envs)
	return n.agents.sendBatch(ctx, envs)
}

// PublishAgent publishes payload (application/json) to topic under the tenant of snap: the
// router matches the tenant's subscriptions once and sends one batch per destination worker. It
// returns the number of deliveries the workers enqueued once they acknowledged them (a delivery
// the tenant may not make, or to a type without a live owner, is not counted). Agents' replies
// to published messages are dropped. The error is non-nil for invalid input, a stopping
// runtime (ErrAgentsStopped) or when ctx ends. It is goroutine-safe.
func (n *Node) PublishAgent(ctx context.Context, topic *messages.TopicId, payload []byte, snap *messages.ExecutionContextSnapshot) (int, error) {
	if err := agents.ValidateTopic(topic); err != nil {
		return 0, fmt.Errorf("actors: publish: %w", err)
	}
	if err := agents.ValidateTenant(snap.GetTenantId()); err != nil {
		return 0, fmt.Errorf("actors: publish: %w", err)
	}
	if n.agents == nil {
		return 0, ErrAgentsStopped
	}
	env := &messages.MessageEnvelope{Id: n.agents.messageID(), Topic: topic, Payload: payload, ContentType: "application/json", Snapshot: snap}
	return n.agents.publish(ctx, env)
}

// Subscribe adds subscriptions owned by this node's worker (an id is assigned to those without
// one) and returns their ids once the routers of the cluster know them (or ctx ends). The
// subscriptions go away with this node: when it stops or is evicted. It is goroutine-safe; the
// runtime keeps subs.
func (n *Node) Subscribe(ctx context.Context, subs ...*messages.Subscription) ([]string, error) {
	out := make([]string, 0, len(subs))
	for _, s := range subs {
		if err := agents.ValidateSubscription(s); err != nil {
			return nil, fmt.Errorf("actors: subscribe: %w", err)
		}
		if s.Id == "" {
			s.Id = ids.New("sub")
		}
		out = append(out, s.Id)
	}
	return out, n.agents.changeSubscriptions(ctx, subs, nil)
}

// Unsubscribe removes subscriptions of this node by id (unknown ids are ignored), like Subscribe.
func (n *Node) Unsubscribe(ctx context.Context, subIDs ...string) error {
	return n.agents.changeSubscriptions(ctx, nil, subIDs)
}

// AgentTypeInfo is one agent type of the directory with its live owners (worker ids).
type AgentTypeInfo struct {
	Name   string
	Owners []string
}

// AgentWorkerInfo is one worker of the directory.
type AgentWorkerInfo struct {
	ID, NodeID, Address string
	Self                bool
	Types               []string
	Subscriptions       int
	ActiveAgents        int
	Failures            int
	Unhealthy           bool
	Evicted             bool
	Leaving             bool
	// SendBatches and PublishBatches count the requests this node's router sent the worker.
	SendBatches, PublishBatches uint64
}

// AgentDirectory is this node's router's view: types with their owners, workers, and the
// router's pending sessions (the router is idle when there are none).
type AgentDirectory struct {
	Types           []AgentTypeInfo
	Workers         []AgentWorkerInfo
	PendingSessions int
}

// AgentDirectory returns this node's router's view of the agent directory. It blocks for one
// request to the local router; the caller owns the result.
func (n *Node) AgentDirectory(ctx context.Context) (*AgentDirectory, error) {
	return n.agents.directory(ctx)
}
