package engine

import (
	"time"

	"github.com/dairuntime/dair/messages"
)

// Effect is work the shell must carry out for the machine: start or cancel an attempt, commit
// a step record, arm a timer, record a run status, finalize, stop. Effects are returned in
// the order they must be carried out; outcomes come back as events. The set of effects is
// closed: the types below.
type Effect interface{ isEffect() }

// StartStep starts attempt Attempt of Step: run handler Uses with With, bounded by Timeout.
// Its outcome comes back as AttemptSucceeded, AttemptFailed or AttemptTimedOut with the same Step and
// Attempt. The Commit of the attempt's start comes just before it.
type StartStep struct {
	Step    string
	Attempt int
	Uses    string
	// With is the rendered `with` of the step; the shell owns it.
	With map[string]any
	// Timeout is the step's timeout, or Config.DefaultTimeout when it has none.
	Timeout time.Duration
}

// Commit writes Record under the execution's fencing epoch with Ledger appended in the same
// write. The shell completes the ledger entry (run, execution, instance, epoch, tenant) and
// answers with CommitDone{ID: ID}. Commits must reach the store in the order they are
// returned.
type Commit struct {
	ID     uint64
	Record *messages.StepState
	Ledger *messages.LedgerEntry
	// Finalize, set only under Config.FoldFinalize on the success of a run's last step, is
	// the run's Finalize, to be written in the same store write after the record (when the
	// record is written or the step had already succeeded). The shell answers CommitDone and
	// then, unless the commit was fenced, FinalizeDone.
	Finalize *Finalize
	// Async marks the success of a pure step (Config.Pure): the machine released its
	// dependents without waiting for the answer, which only matters when it refuses (the
	// machine then stops, fenced). Nothing waits for the write, so the shell may hold it for
	// the commits that follow it; it must still reach the store in order, and a refusal
	// must refuse every later commit of the execution (a lost epoch does).
	Async bool
}

// ScheduleRetry asks for RetryDue{Step, Attempt} at At (the failed attempt's end plus its
// backoff).
type ScheduleRetry struct {
	Step    string
	Attempt int
	At      time.Time
}

// CancelAttempt cancels the running attempt Attempt of Step (its context). The attempt still
// reports its outcome, which the machine then only counts.
type CancelAttempt struct {
	Step    string
	Attempt int
}

// SetRunStatus records the run's status (RunPaused or RunRunning) on the execution and the
// run, with a run_paused or run_resumed ledger entry. No answer is expected.
type SetRunStatus struct{ Status RunStatus }

// Finalize records the terminal Status, Reason and Output on the execution and the run (with
// the run's terminal ledger entry), not before NotBefore (zero: at once). The shell answers
// with FinalizeDone.
type Finalize struct {
	Status RunStatus
	Reason string
	// Output is the JSON object of the leaf steps' outputs, keyed by step id.
	Output    []byte
	NotBefore time.Time
}

// Stop ends the execution: report Status (or, when Fenced, that the epoch was lost) to the
// runtime instance and stop. It is always the last effect; the machine ignores every later
// event.
type Stop struct {
	Status RunStatus
	// Fenced reports that the execution stopped because it lost its epoch: nothing was
	// finalized and nothing more may be written. Err says why.
	Fenced bool
	Err    error
}

func (StartStep) isEffect()     {}
func (Commit) isEffect()        {}
func (ScheduleRetry) isEffect() {}
func (CancelAttempt) isEffect() {}
func (SetRunStatus) isEffect()  {}
func (Finalize) isEffect()      {}
func (Stop) isEffect()          {}
