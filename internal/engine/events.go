package engine

import (
	"time"

	"github.com/dairuntime/dair/messages"
)

// Event is something that happened to an execution: its state was loaded, an attempt ended,
// a commit was answered, a timer fired, or the run was controlled. The shell feeds events to
// Machine.Step in the order it receives them. The set of events is closed: the types below.
type Event interface{ isEvent() }

// Loaded delivers the durable state of the execution: it starts the machine. Events that
// arrive before it (Pause, Resume, Cancel, Fenced) are remembered and applied once it comes.
type Loaded struct {
	// Index is the compiled pipeline the execution pinned (see NewIndex).
	Index *Index
	// ExecutionID names the execution (templates see it as .execution_id).
	ExecutionID string
	// Status is the execution record's status; a terminal status is finalized again as it is.
	Status RunStatus
	// Reason is the execution record's failure reason (used with a terminal Status).
	Reason string
	// Steps are the committed step records, in any order. The machine does not modify them
	// and keeps their outputs: the caller must not modify those afterwards.
	Steps []*messages.StepState
	// Input is the run's input, JSON ("" and malformed input render as nil).
	Input []byte
	// Unconfirmed: the execution's start (its record, the run marked running) is queued to
	// a store that applies writes in the order they are queued, but not yet written. Until
	// Confirmed only pure steps start (Config.Pure: their commits, queued after the start,
	// land with it or not at all) and the run does not finalize by a Finalize of its own. The
	// shell answers Confirmed once the start is written, or Fenced when it was refused.
	Unconfirmed bool
}

// Confirmed reports that the start of an execution loaded Unconfirmed was written.
type Confirmed struct{}

// AttemptSucceeded reports that attempt Attempt of Step returned Output.
type AttemptSucceeded struct {
	Step    string
	Attempt int
	// Output is the handler's output as JSON; it is committed as it is, and kept (the caller
	// must not modify it afterwards).
	Output []byte
	// Duration, PromptTokens and CompletionTokens are recorded in the step's ledger entry.
	Duration                       time.Duration
	PromptTokens, CompletionTokens int64
}

// AttemptFailed reports that attempt Attempt of Step failed with Err. A Permanent failure is not
// retried.
type AttemptFailed struct {
	Step      string
	Attempt   int
	Err       error
	Permanent bool
}

// AttemptTimedOut reports that attempt Attempt of Step ran past its timeout (Err is what the
// handler returned). It is retried like any failure that is not permanent.
type AttemptTimedOut struct {
	Step    string
	Attempt int
	Err     error
}

// CommitResult is the store's answer to a Commit effect.
type CommitResult uint8

// Commit results.
const (
	// CommitOK: the record and its ledger entry are durable.
	CommitOK CommitResult = iota
	// CommitAlreadyCommitted: the step had already succeeded; a success counts as committed.
	CommitAlreadyCommitted
	// CommitFenced: the epoch is stale (or the write was refused for good): stop, write nothing.
	CommitFenced
)

// String returns "ok", "already-committed" or "fenced".
func (r CommitResult) String() string {
	switch r {
	case CommitOK:
		return "ok"
	case CommitAlreadyCommitted:
		return "already-committed"
	case CommitFenced:
		return "fenced"
	}
	return "unknown"
}

// CommitDone answers the Commit effect with the same ID.
type CommitDone struct {
	ID     uint64
	Result CommitResult
	// Err is the store's error when Result is CommitFenced (reported in the Stop effect).
	Err error
}

// RetryDue reports that the ScheduleRetry timer of Step for Attempt fired.
type RetryDue struct {
	Step    string
	Attempt int
}

// Cancel asks the run to stop as cancelled; Reason defaults to "cancelled".
type Cancel struct{ Reason string }

// Pause asks the run to start no new attempt until Resume.
type Pause struct{}

// Resume undoes Pause.
type Resume struct{}

// Fenced reports that the execution lost its epoch outside a commit (loading it, or a write
// other than a step commit, was refused): stop without writing.
type Fenced struct{ Err error }

// FinalizeResult is the store's answer to a Finalize effect.
type FinalizeResult uint8

// Finalize results.
const (
	// FinalizeOK: the terminal status is recorded.
	FinalizeOK FinalizeResult = iota
	// FinalizeFenced: the epoch is stale: stop without writing.
	FinalizeFenced
	// FinalizeFailed: the write failed and may succeed later: finalize again after a pause.
	FinalizeFailed
)

// FinalizeDone answers the Finalize effect.
type FinalizeDone struct {
	Result FinalizeResult
	Err    error
}

func (Loaded) isEvent()           {}
func (AttemptSucceeded) isEvent() {}
func (AttemptFailed) isEvent()    {}
func (AttemptTimedOut) isEvent()  {}
func (CommitDone) isEvent()       {}
func (RetryDue) isEvent()         {}
func (Cancel) isEvent()           {}
func (Pause) isEvent()            {}
func (Resume) isEvent()           {}
func (Fenced) isEvent()           {}
func (FinalizeDone) isEvent()     {}
func (Confirmed) isEvent()        {}
