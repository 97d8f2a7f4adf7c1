package messages

import (
	"errors"
	"fmt"
)

// ControlOp is an operation a ControlRequest carries (its Op field): a run control (cancel,
// pause or resume one run on the instance that holds it), a queue control (pause, resume,
// drain or undrain an instance's local queue) or stop_instance. Its String form is the name
// on the wire ("cancel_run", "pause_queue", ...), which every transport and every node of a
// cluster must agree on. The zero value is no operation; ParseControlOp never returns it.
type ControlOp uint8

// Control operations.
const (
	// OpCancelRun cancels a run: its execution stops, or a run still queued leaves the queue.
	OpCancelRun ControlOp = iota + 1
	// OpPauseRun pauses a running run: no new step attempt starts.
	OpPauseRun
	// OpResumeRun resumes a paused run.
	OpResumeRun
	// OpPauseQueue stops an instance's local queue from starting runs.
	OpPauseQueue
	// OpResumeQueue lets a paused queue start runs again.
	OpResumeQueue
	// OpDrainQueue makes an instance finish its runs and accept no new ones.
	OpDrainQueue
	// OpUndrainQueue takes an instance out of draining.
	OpUndrainQueue
	// OpStopInstance stops the runtime instance.
	OpStopInstance
)

var controlOpNames = [...]string{
	OpCancelRun:    "cancel_run",
	OpPauseRun:     "pause_run",
	OpResumeRun:    "resume_run",
	OpPauseQueue:   "pause_queue",
	OpResumeQueue:  "resume_queue",
	OpDrainQueue:   "drain_queue",
	OpUndrainQueue: "undrain_queue",
	OpStopInstance: "stop_instance",
}

// ErrUnknownControlOp is returned by ParseControlOp for a name no ControlOp has.
var ErrUnknownControlOp = errors.New("messages: unknown control op")

// String returns the wire name of o ("cancel_run", ...), or "unknown" for a value that is not
// a ControlOp.
func (o ControlOp) String() string {
	if o != 0 && int(o) < len(controlOpNames) {
		return controlOpNames[o]
	}
	return "unknown"
}

// IsRunOp reports whether o controls one run (cancel, pause or resume) rather than an
// instance or its queue.
func (o ControlOp) IsRunOp() bool {
	return o == OpCancelRun || o == OpPauseRun || o == OpResumeRun
}

// ParseControlOp maps a wire name (ControlRequest.Op) to its ControlOp. A name no ControlOp
// has is an error wrapping ErrUnknownControlOp.
func ParseControlOp(s string) (ControlOp, error) {
	for i, n := range controlOpNames {
		if i != 0 && n == s {
			return ControlOp(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownControlOp, s)
}

// ControlOp returns the request's operation, parsed from its Op field; see ParseControlOp.
func (x *ControlRequest) ControlOp() (ControlOp, error) {
	return ParseControlOp(x.GetOp())
}
