package actors

import (
	"context"

	"github.com/dairuntime/dair/internal/handlers"
)

// The agent.send and agent.publish step handlers (internal/handlers) send through the node
// running the attempt: its context carries the node once the agent runtime has started.

var _ handlers.AgentMessenger = (*Node)(nil)

// withAgentSteps returns ctx carrying the node's agent runtime for the agent step handlers, or
// ctx itself before the runtime has started (the handlers then fail the attempt, retryably).
func (e *env) withAgentSteps(ctx context.Context) context.Context {
	if n := e.agentNode.Load(); n != nil {
		return handlers.WithAgents(ctx, n)
	}
	return ctx
}
