package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/messages"
)

// control applies a queue or run control op (through the provider's Control) and answers it.
func (in *instance) control(c actor.Context, m *messages.ControlRequest) *messages.ProviderResult {
	switch m.Op {
	case "pause_queue":
		in.q.Pause()
	case "resume_queue":
		in.q.Resume()
		in.startRuns(c)
	case "drain_queue":
		in.q.Drain()
	case "undrain_queue":
		in.q.Undrain()
	case "cancel_run", "pause_run", "resume_run":
		if reason := in.controlRun(c, m); reason != "" {
			return in.result(m.Op, false, reason)
		}
	case "stop_instance":
		in.stopping = true
		c.Stop(c.Self())
		return in.result(m.Op, true, "")
	default:
		return in.result(m.Op, false, "unknown-op")
	}
	in.publish(c)
	return in.result(m.Op, true, "")
}

// controlRun sends a run-control op to the run's execution, or cancels a run still queued. It
// returns why it could not ("" when it could).
func (in *instance) controlRun(c actor.Context, m *messages.ControlRequest) string {
	lr, ok := in.q.Find(m.LocalRunId, m.SharedRunId)
	if !ok {
		return "run-not-found"
	}
	if r := in.execs[lr]; r != nil {
		var msg any = &pauseRun{}
		switch m.Op {
		case "cancel_run":
			msg = &cancelRun{reason: m.Reason}
		case "resume_run":
			msg = &resumeRun{}
		}
		c.Send(r.pid, msg)
		return ""
	}
	if !in.q.IsQueued(lr) {
		return ""
	}
	if m.Op != "cancel_run" {
		return "run-not-started"
	}
	if r, ok := in.q.Unqueue(lr); ok {
		cancelQueued(in.env, r.Req, in.spec.ID, m.Reason)
	}
	return ""
}

func (in *instance) runStatus(m *messages.RunStatusRequest) *messages.RunStatus {
	shared, status, ok := in.q.Status(m.LocalRunId)
	if !ok {
		return &messages.RunStatus{LocalRunId: m.LocalRunId, Result: in.result("run-status", false, "run-not-found")}
	}
	return &messages.RunStatus{LocalRunId: m.LocalRunId, SharedRunId: shared, Status: status, Result: in.result("run-status", true, "")}
}
