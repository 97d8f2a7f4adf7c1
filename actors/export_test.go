package actors

import (
	"context"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// InjectExecutionPanic makes the execution actor of a running run panic once. It exists for
// the package's tests only (supervision and rehydration).
func InjectExecutionPanic(ctx context.Context, n *Node, runID string) error {
	return n.injectExecutionPanic(ctx, runID)
}

// AgentCallsInFlight returns how many facade calls (sends, publishes) of n's agent runtime are
// in progress: accepted, not yet answered.
func AgentCallsInFlight(n *Node) int64 { return n.agents.inflight.Load() }

// AgentInlineRuns returns how many local sends of n ran their handler on the caller's goroutine.
func AgentInlineRuns(n *Node) uint64 { return n.agents.inlineRuns.Load() }

// AgentWorkerInline returns how many deliveries of non-blocking types n's worker ran on its own
// goroutine.
func AgentWorkerInline(n *Node) uint64 { return n.agents.workerInline.Load() }

// AgentIdle reports whether tenant's agent id is active on n with nothing queued or running in
// its mailbox (a send to it may then run inline).
func AgentIdle(n *Node, tenant string, id *messages.AgentId) bool {
	slot := n.agents.slots.get(agents.KeyOf(tenant, id))
	if slot == nil {
		return false
	}
	mb := slot.mailbox
	return !mb.running.Load() && mb.pending.Load() == 0 && !mb.suspended.Load()
}
