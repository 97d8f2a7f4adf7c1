package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// control applies a queue or run control op (through the provider's Control) and answers it.
func (in *instance) control(c actor.Context, m *messages.ControlRequest) *messages.ProviderResult {
	op, err := m.ControlOp()
	if err != nil {
		return in.result(m.Op, false, "unknown-op")
	}
	switch op {
	case messages.OpPauseQueue:
		in.q.Pause()
	case messages.OpResumeQueue:
		in.q.Resume()
		in.startRuns(c)
	case messages.OpDrainQueue:
		in.q.Drain()
	case messages.OpUndrainQueue:
		in.q.Undrain()
	case messages.OpCancelRun, messages.OpPauseRun, messages.OpResumeRun:
		if reason := in.controlRun(c, op, m); reason != "" {
			return in.result(m.Op, false, reason)
		}
	case messages.OpStopInstance:
		in.stopping = true
		c.Stop(c.Self())
		return in.result(m.Op, true, "")
	}
	in.publish(c)
	return in.result(m.Op, true, "")
}

// reasonRunStarting refuses a run control while the instance holds the run with neither a queue
// place nor an execution to receive it.
const reasonRunStarting = "run-starting"

// controlRun sends a run-control op to the run's execution, or cancels a run still queued. It
// returns why it could not ("" when it could).
func (in *instance) controlRun(c actor.Context, op messages.ControlOp, m *messages.ControlRequest) string {
	lr, ok := in.q.Find(m.LocalRunId, m.SharedRunId)
	if !ok {
		return "run-not-found"
	}
	if r := in.execs[lr]; r != nil {
		var msg any = &pauseRun{}
		switch op {
		case messages.OpCancelRun:
			msg = &cancelRun{reason: m.Reason}
		case messages.OpResumeRun:
			msg = &resumeRun{}
		}
		c.Send(r.pid, msg)
		return ""
	}
	if !in.q.IsQueued(lr) {
		// Neither queued nor executing: nothing would receive the op, so it is refused rather
		// than acknowledged and dropped.
		return reasonRunStarting
	}
	if op != messages.OpCancelRun {
		return "run-not-started"
	}
	if r, ok := in.q.Unqueue(lr); ok {
		started := in.started[lr] != nil
		delete(in.started, lr)
		cancelQueued(in.env, r.Req, in.spec.ID, m.Reason, started)
	}
	return ""
}

func (in *instance) runStatus(m *messages.RunStatusRequest) *messages.RunStatus {
	shared, status, ok := in.q.Status(m.LocalRunId)
	if !ok {
		return &messages.RunStatus{LocalRunId: m.LocalRunId, Result: in.result(providers.OpRunStatus, false, "run-not-found")}
	}
	return &messages.RunStatus{LocalRunId: m.LocalRunId, SharedRunId: shared, Status: status, Result: in.result(providers.OpRunStatus, true, "")}
}
