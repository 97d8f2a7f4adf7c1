// Package dair is the Go library API of dair, the Deterministic AI Runtime: start a node from a
// Config, register step handlers and pipelines, submit runs and await their results. The node
// runs every run durably: steps are committed under a fencing epoch, a crashed execution is
// restarted and rehydrated, and a killed node's runs resume with the same ExecutionId.
//
// # Usage
//
// Every call that can fail returns an error; the store outlives the node, so stop the node
// first, then close the store:
//
//	func run(ctx context.Context) (err error) {
//		st, err := dair.OpenStore(ctx, "bolt://./.dair/dair.db")
//		if err != nil {
//			return err
//		}
//		node, err := dair.Start(ctx, dair.Config{Store: st})
//		if err != nil {
//			return errors.Join(err, st.Close())
//		}
//		defer func() { err = errors.Join(err, node.Stop(ctx), st.Close()) }()
//		if err := node.Handlers().Register("greet", dair.HandlerFunc(greet)); err != nil {
//			return err
//		}
//		if _, err := node.PutPipeline(ctx, pipelineYAML); err != nil {
//			return err
//		}
//		run, err := node.Submit(ctx, dair.SubmitRequest{Pipeline: "hello", Snapshot: dair.Tenant("acme")})
//		if err != nil {
//			return err
//		}
//		done, err := node.Await(ctx, run.SharedRunId)
//		if err != nil {
//			return err
//		}
//		fmt.Println(done.Status, string(done.Output))
//		return nil
//	}
package dair

import (
	"context"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/server"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Re-exported engine types.
type (
	// Config configures a node; see actors.Config for every field and its default.
	Config = actors.Config
	// Node is a running node.
	Node = actors.Node
	// SubmitRequest is one run submission.
	SubmitRequest = actors.SubmitRequest
	// Store is the durable state a node runs on.
	Store = store.Store
	// Handler runs one step attempt.
	Handler = step.Handler
	// HandlerFunc adapts a function to Handler.
	HandlerFunc = step.HandlerFunc
	// Request is one step attempt's input.
	Request = step.Request
	// Result is a step attempt's output.
	Result = step.Result
)

// Re-exported agent messaging types (seed 003). A node's agent API is on Node:
// RegisterAgentType, SendAgent, SendAgentEnvelope, SendAgentBatch, PublishAgent, Subscribe,
// Unsubscribe and AgentDirectory; they behave the same on one node and across a cluster.
type (
	// AgentHandler handles one message for one agent (one at a time per agent, in order).
	AgentHandler = actors.AgentHandler
	// Agent is the running agent a handler works for: its id, tenant and state.
	Agent = actors.Agent
	// AgentTypeOption configures RegisterAgentType (ForTenants, OnOwnGoroutine, NonBlocking).
	AgentTypeOption = actors.AgentTypeOption
	// AgentDirectory is a node's router's view: types, owners, workers, pending sends.
	AgentDirectory = actors.AgentDirectory
	// AgentConfig holds the agent runtime's knobs (Config.Agents).
	AgentConfig = agents.Config
	// AgentID names one agent: its type and key, scoped by the message's tenant.
	AgentID = messages.AgentId
	// TopicID names a publish topic: its type and optional source.
	TopicID = messages.TopicId
	// MessageEnvelope is one message to an agent.
	MessageEnvelope = messages.MessageEnvelope
	// DeliveryOutcome is the result of one send.
	DeliveryOutcome = messages.DeliveryOutcome
	// Subscription routes a tenant's published messages to agents of one type.
	Subscription = messages.Subscription
)

// Outcome statuses of DeliveryOutcome.Status.
const (
	Delivered     = messages.DeliveryOutcome_DELIVERED
	Timeout       = messages.DeliveryOutcome_TIMEOUT
	Undeliverable = messages.DeliveryOutcome_UNDELIVERABLE
	AgentError    = messages.DeliveryOutcome_ERROR
)

// Built-in agent types (Config.AgentTypes, `--agents`).
const (
	AgentEcho    = actors.AgentEcho
	AgentCounter = actors.AgentCounter
)

// PureHandler marks h as pure: its output is a function of its request's With alone and it has
// no side effect, so the steps that need it start without waiting for the write of its success
// (a crash that loses the write runs it again, with the same output). See step.Pure.
func PureHandler(h Handler) Handler { return step.Pure(h) }

// ForTenants restricts an agent type to the given tenants; others get undeliverable
// (tenant-refused).
func ForTenants(tenants ...string) AgentTypeOption { return actors.ForTenants(tenants...) }

// OnOwnGoroutine keeps an agent type's handler off its local callers' goroutines: a caller then
// always gets its outcome at the deadline, even from a handler that ignores its context.
func OnOwnGoroutine() AgentTypeOption { return actors.OnOwnGoroutine() }

// NonBlocking declares that an agent type's handler never blocks (no I/O, no waiting): a message
// from another node then runs on the receiving worker's goroutine when its agent is idle, one
// goroutine hand-off less per message. A handler that blocks would stall the node's deliveries.
func NonBlocking() AgentTypeOption { return actors.NonBlocking() }

// AgentRef parses "TYPE/KEY" into an AgentID.
func AgentRef(ref string) (*AgentID, error) { return agents.ParseAgentRef(ref) }

// Topic parses "TYPE" or "TYPE/SOURCE" into a TopicID.
func Topic(topic string) (*TopicID, error) { return agents.ParseTopic(topic) }

// OutcomeName returns the lowercase name of an outcome status: "delivered", "timeout",
// "undeliverable" or "error".
func OutcomeName(o *DeliveryOutcome) string { return agents.StatusName(o.GetStatus()) }

// ReasonCode returns the stable code of an outcome's reason ("no-live-owner",
// "worker-evicted", "tenant-refused", ...), or "".
func ReasonCode(o *DeliveryOutcome) string { return agents.ReasonCode(o.GetReason()) }

// Start starts a node. It returns once the node's supervision tree is up.
func Start(ctx context.Context, cfg Config) (*Node, error) { return actors.Start(ctx, cfg) }

// Tenant returns an ExecutionContextSnapshot for a tenant, for library callers that have
// already authenticated their caller.
func Tenant(id string) *messages.ExecutionContextSnapshot {
	return &messages.ExecutionContextSnapshot{TenantId: id, Source: "library", Roles: []string{messages.RoleTenant}}
}

// OpenStore opens a store by URL: "bolt://PATH" (the embedded single-file store, one process)
// or "redis://HOST:PORT/DB" (shared by a cluster). The caller closes it.
func OpenStore(ctx context.Context, url string) (Store, error) { return server.OpenStore(ctx, url) }
