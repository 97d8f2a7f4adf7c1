package remote

import (
	"context"
	"time"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// Backend is what a runtime host's command server drives: the runtime instances of this
// process, reached by id (the node's "local" provider implements it). Its methods block until
// the instance answers or ctx ends, are goroutine-safe and never return nil.
type Backend interface {
	providers.Dispatcher
	providers.StatusReader
	providers.Controller
}

// Instances lists the ids of the runtime instances a host serves. It must be goroutine-safe and
// must not block.
type Instances func() []string

// Execute carries out one runtime command against b and returns its answer (never nil). The
// command's target instance is cmd.RuntimeInstanceId, else the one named in its payload. A
// command read after its deadline is refused with reason "command-expired" (not retryable): its
// sender gave up on it. It blocks like the Backend method it calls.
func Execute(ctx context.Context, b Backend, cmd *messages.RuntimeCommand, now time.Time) *messages.RuntimeCommandResult {
	out := &messages.RuntimeCommandResult{CommandId: cmd.GetCommandId()}
	id := cmd.GetRuntimeInstanceId()
	d := func(payloadID string) *messages.CapacityDescriptor {
		if id == "" {
			id = payloadID
		}
		return &messages.CapacityDescriptor{RuntimeInstanceId: id}
	}
	if dl := cmd.GetDeadline(); dl > 0 && now.UnixNano() > dl {
		out.Result = providers.Failure(b.Name(), id, "command", ReasonCommandExpired, false)
		return out
	}
	switch c := cmd.GetCommand().(type) {
	case *messages.RuntimeCommand_Dispatch:
		out.Result = b.Dispatch(ctx, d(c.Dispatch.GetRuntimeInstanceId()), c.Dispatch)
	case *messages.RuntimeCommand_Status:
		out.Status = b.QueueStatus(ctx, d(c.Status.GetRuntimeInstanceId()))
		out.Result = out.Status.GetResult()
	case *messages.RuntimeCommand_RunStatus:
		out.RunStatus = b.RunStatus(ctx, d(c.RunStatus.GetRuntimeInstanceId()), c.RunStatus.GetLocalRunId())
		out.Result = out.RunStatus.GetResult()
	case *messages.RuntimeCommand_Control:
		out.Result = b.Control(ctx, d(c.Control.GetRuntimeInstanceId()), c.Control)
	case *messages.RuntimeCommand_Heartbeat:
		hb := Heartbeat(ctx, b, d(c.Heartbeat.GetRuntimeInstanceId()).RuntimeInstanceId, c.Heartbeat.GetSentAt())
		out.Heartbeat, out.Result = hb, providers.Success(b.Name(), id, OpHeartbeat)
		if hb.Capacity == nil {
			out.Result = providers.Failure(b.Name(), id, OpHeartbeat, providers.ReasonInstanceNotFound, true)
		}
	default:
		out.Result = providers.Failure(b.Name(), id, "command", providers.ReasonInvalidRequest, false)
	}
	return out
}

// Heartbeat answers a heartbeat for instance id: its current capacity descriptor (nil when the
// instance does not answer).
func Heartbeat(ctx context.Context, b Backend, id string, sentAt int64) *messages.HeartbeatResponse {
	qs := b.QueueStatus(ctx, &messages.CapacityDescriptor{RuntimeInstanceId: id})
	hb := &messages.HeartbeatResponse{RuntimeInstanceId: id, SentAt: sentAt, AnsweredAt: time.Now().UnixNano()}
	if qs.GetResult().GetOk() {
		hb.Capacity = qs.GetCapacity()
	}
	return hb
}

// List returns the capacity descriptors of the instances ids (those that answer).
func List(ctx context.Context, b Backend, ids []string) *messages.ListInstancesResponse {
	out := &messages.ListInstancesResponse{}
	for _, id := range ids {
		qs := b.QueueStatus(ctx, &messages.CapacityDescriptor{RuntimeInstanceId: id})
		if qs.GetResult().GetOk() && qs.GetCapacity() != nil {
			out.Instances = append(out.Instances, qs.GetCapacity())
		}
	}
	return out
}

// OpHeartbeat is the op of a heartbeat's result.
const OpHeartbeat = "heartbeat"

// ReasonCommandExpired is the reason of a command refused because it was read after its
// deadline (a reclaimed command nobody waits for).
const ReasonCommandExpired = "command-expired"

// CommandInstance returns the instance cmd targets: its RuntimeInstanceId, else the one its
// payload names.
func CommandInstance(cmd *messages.RuntimeCommand) string {
	if id := cmd.GetRuntimeInstanceId(); id != "" {
		return id
	}
	switch c := cmd.GetCommand().(type) {
	case *messages.RuntimeCommand_Dispatch:
		return c.Dispatch.GetRuntimeInstanceId()
	case *messages.RuntimeCommand_Status:
		return c.Status.GetRuntimeInstanceId()
	case *messages.RuntimeCommand_RunStatus:
		return c.RunStatus.GetRuntimeInstanceId()
	case *messages.RuntimeCommand_Control:
		return c.Control.GetRuntimeInstanceId()
	case *messages.RuntimeCommand_Heartbeat:
		return c.Heartbeat.GetRuntimeInstanceId()
	}
	return ""
}
