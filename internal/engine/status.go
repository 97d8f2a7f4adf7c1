package engine

import "github.com/dairuntime/dair/messages"

// StepStatus is the state of one step of an execution. Its String form is the contract's step
// status (messages.StepPending ... messages.StepCancelled).
type StepStatus uint8

// Step statuses. A step waiting for a retry timer is StepPending with attempts already made.
const (
	// StepPending: not started yet, or waiting to be attempted again.
	StepPending StepStatus = iota
	// StepRunning: an attempt was started (its start is committed or being committed), or it
	// finished and its result is being committed.
	StepRunning
	// StepSucceeded: a success is committed; the step never runs again.
	StepSucceeded
	// StepFailed: a failure with no attempts left is committed.
	StepFailed
	// StepSkipped: the step can never run (the run failed first); committed as skipped.
	StepSkipped
	// StepCancelled: a committed record says cancelled (the engine reruns such steps).
	StepCancelled
)

var stepStatusNames = [...]string{
	StepPending:   messages.StepPending,
	StepRunning:   messages.StepRunning,
	StepSucceeded: messages.StepSucceeded,
	StepFailed:    messages.StepFailed,
	StepSkipped:   messages.StepSkipped,
	StepCancelled: messages.StepCancelled,
}

// String returns the contract's name of s ("pending", "running", ...).
func (s StepStatus) String() string {
	if int(s) < len(stepStatusNames) {
		return stepStatusNames[s]
	}
	return "unknown"
}

// ParseStepStatus maps a contract step status to a StepStatus; "" is StepPending. ok is
// false for names the contract does not define.
func ParseStepStatus(s string) (st StepStatus, ok bool) {
	if s == "" {
		return StepPending, true
	}
	for i, n := range stepStatusNames {
		if n == s {
			return StepStatus(i), true
		}
	}
	return StepPending, false
}

// RunStatus is the status of the run an execution serves, as the engine sees it. Its String
// form is the contract's run status (messages.RunRunning ...).
type RunStatus uint8

// Run statuses an execution can be in. The zero value is RunRunning.
const (
	// RunRunning: steps are started as they become ready.
	RunRunning RunStatus = iota
	// RunPaused: no new attempt starts; attempts in flight finish and commit.
	RunPaused
	// RunSucceeded: every step succeeded (or was skipped).
	RunSucceeded
	// RunFailed: a step failed with no attempts left.
	RunFailed
	// RunCancelled: the run was cancelled.
	RunCancelled
)

var runStatusNames = [...]string{
	RunRunning:   messages.RunRunning,
	RunPaused:    messages.RunPaused,
	RunSucceeded: messages.RunSucceeded,
	RunFailed:    messages.RunFailed,
	RunCancelled: messages.RunCancelled,
}

// String returns the contract's name of s ("running", "paused", ...).
func (s RunStatus) String() string {
	if int(s) < len(runStatusNames) {
		return runStatusNames[s]
	}
	return "unknown"
}

// Terminal reports whether s is final (succeeded, failed or cancelled).
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// ParseRunStatus maps the status of an execution record to a RunStatus. Statuses an
// execution record does not hold (queued, dispatched, ...) and "" map to RunRunning with ok
// false.
func ParseRunStatus(s string) (st RunStatus, ok bool) {
	for i, n := range runStatusNames {
		if n == s {
			return RunStatus(i), true
		}
	}
	return RunRunning, false
}
