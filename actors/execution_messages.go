package actors

import (
	"context"
	"time"

	"github.com/dairuntime/dair/internal/engine"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// execSeed is what survives a supervisor restart of an execution actor: the dispatch it serves
// and the fencing epoch it acquired. Only the execution actor touches it, from Receive (and
// its instance once the actor is gone, to fail the run).
type execSeed struct {
	env         *env
	req         *messages.DispatchRequest
	localRunID  string
	instanceID  string
	workers     int
	executionID string
	epoch       int64
	// marked is set once the run record names this activation (running, its execution id):
	// until then every load tries again, so an activation whose first mark failed (the store
	// went away mid-write) never runs a run that was requeued meanwhile.
	marked bool
	// released is set once the store released the run's slot hold with the execution's end
	// (store.ExecutionLifecycle): the instance does not release it again.
	released    bool
	incarnation int
	// startWait answers the start queued by the first activation (store.QueuedStarter), nil
	// when the start was written before the load returned: a restarted incarnation waits for
	// it before it reads the execution.
	startWait func() (store.StartResult, error)
	// started is the execution record that the run's assignment wrote (prestart.go): the
	// first load takes it instead of reading it back (nothing is committed yet).
	started *messages.Execution
}

// Messages private to an execution (inc ties each to one incarnation of the actor, so replies
// addressed to an incarnation that crashed are ignored after the restart).
type (
	execLoaded struct {
		inc         int
		executionID string
		epoch       int64
		marked      bool
		exec        *messages.Execution
		steps       []*messages.StepState
		pipe        *compiled
		err         error
		// confirm, set when the start was queued rather than written (store.QueuedStarter),
		// answers it: the machine is loaded unconfirmed, and an execStarted follows.
		confirm func() (store.StartResult, error)
	}
	// execStarted reports that the queued start of the execution was written (err nil) or
	// refused.
	execStarted struct {
		inc int
		err error
	}
	stepDone struct {
		inc       int
		stepID    string
		attempt   int
		output    []byte
		usage     step.Usage
		err       error
		permanent bool
		timedOut  bool
		dur       time.Duration
	}
	commitDone struct {
		inc    int
		id     uint64
		result engine.CommitResult
		err    error
	}
	stepRetry struct {
		inc     int
		stepID  string
		attempt int
	}
	execReload   struct{ inc int }
	finalizeDone struct {
		inc      int
		result   engine.FinalizeResult
		err      error
		released bool // the run's slot hold was released with the execution's end
	}
	finalizeRetry struct {
		inc int
		f   engine.Finalize
	}
	// runFinished tells the runtime instance that an execution ended, and how.
	runFinished struct {
		localRunID  string
		executionID string
		outcome     execOutcome
		released    bool // the store released the run's slot hold already
	}
)

// execOutcome is how an execution ended, as its instance learns it.
type execOutcome uint8

const (
	// execEnded: the execution stopped on its own (its run finished, or it was told to stop).
	execEnded execOutcome = iota
	// execFenced: the execution stopped because its epoch went stale; the run may still be
	// this instance's to resume.
	execFenced
	// execCrashed: the execution's supervisor gave up on it (it stopped without reporting).
	execCrashed
)

// String returns "ended", "fenced" or "crashed".
func (o execOutcome) String() string {
	switch o {
	case execEnded:
		return "ended"
	case execFenced:
		return "fenced"
	case execCrashed:
		return "crashed"
	}
	return "unknown"
}

// Run control messages, sent to an execution by its runtime instance.
type (
	pauseRun  struct{}
	resumeRun struct{}
	cancelRun struct{ reason string }
	// injectPanic makes an execution (or instance) actor panic once (tests of supervision).
	injectPanic struct{}
)

// task is a running attempt of a step: the cancel of its context.
type task struct {
	step    string
	attempt int
	uses    string
	cancel  context.CancelFunc
}
