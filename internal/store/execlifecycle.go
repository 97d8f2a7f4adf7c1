package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/dairuntime/dair/messages"
)

// ErrRunMoved is returned by ExecutionLifecycle.StartExecution when the run may not start on
// the instance: it is assigned to another instance, it is not dispatched, running or paused,
// it names another execution, or it is final without naming this one.
var ErrRunMoved = errors.New("store: run is no longer assigned to this instance")

// ExecutionStart is the first activation of a new run, written by StartExecution.
type ExecutionStart struct {
	// Execution is created (at its Epoch, usually 1) unless it exists. Its SharedRunId names
	// the run, RuntimeInstanceId the instance the run must be assigned to, LocalRunId the
	// local run id the run records.
	Execution *messages.Execution
	// Entry is appended to the run's ledger when the run is marked running (its SharedRunId
	// is set to the run's).
	Entry *messages.LedgerEntry
}

// StartResult is what StartExecution did.
type StartResult struct {
	// Created reports that this call created the execution. False: it existed (an earlier
	// call whose answer was lost created it; execution ids are never reused).
	Created bool
	// Entry is a copy of the appended entry with Seq and At set, or nil when the run was
	// already marked running by this execution, or is final naming it (nothing was written).
	Entry *messages.LedgerEntry
}

// ExecutionFinish is the end of an execution, written by FinishExecution.
type ExecutionFinish struct {
	// ExecutionID and Epoch fence the write: nothing is written unless Epoch is the
	// execution's current epoch.
	ExecutionID string
	Epoch       int64
	// RunID is the execution's shared run.
	RunID string
	// Status (a final status), Output and FailureReason are set on the execution, and on the
	// run unless the run is final already or names another execution.
	Status        string
	Output        []byte
	FailureReason string
	// Entry is the run's terminal ledger entry and Usage its usage event (optional), stored
	// only when the run takes Status.
	Entry *messages.LedgerEntry
	Usage *messages.UsageEvent
	// InstanceID is the instance whose slot hold of the run (and the tenant hold that follows
	// it, see TenantQuotas) is released; "" releases nothing.
	InstanceID string
}

// FinishResult is what FinishExecution did.
type FinishResult struct {
	// Changed reports that the run took the final status in this call, with Entry (and Usage)
	// stored. False: the run was final already or names another execution.
	Changed bool
	// Entry is a copy of the appended entry with Seq and At set (nil unless Changed).
	Entry *messages.LedgerEntry
}

// ExecutionLifecycle is the one-call start and end of an execution: an optional capability of
// a backend, checked by type assertion. Each method is one atomic write (one script on Redis,
// one transaction on bbolt) of what the caller would otherwise do in several calls. Both
// block on I/O and are goroutine-safe.
type ExecutionLifecycle interface {
	// StartExecution creates s.Execution unless it exists and marks its run running (status
	// running, ExecutionId, LocalRunId and AssignedRuntimeInstanceId set) with s.Entry
	// appended, only while the run is assigned to the execution's instance, is dispatched,
	// running or paused, and names no other execution; otherwise it writes nothing and returns
	// ErrRunMoved. An existing execution whose epoch is not s.Execution.Epoch (a recovery
	// fenced it) writes nothing and returns ErrStaleEpoch. A run already marked by this
	// execution (same local run id), or final naming it, is not written again. A missing run
	// is ErrNotFound.
	StartExecution(ctx context.Context, s ExecutionStart) (StartResult, error)
	// FinishExecution ends an execution and its run: only while f.Epoch is the execution's
	// epoch (ErrStaleEpoch otherwise, ErrNotFound for a missing execution or run, and nothing
	// is written), it sets the execution's status, output and reason; gives the run the same
	// unless it is final already or names another execution, appending f.Entry and storing
	// f.Usage with it (so the run is metered once whatever the number of finishers); and
	// releases f.InstanceID's hold of the run.
	FinishExecution(ctx context.Context, f ExecutionFinish) (FinishResult, error)
}

// QueuedStarter is an ExecutionLifecycle whose writes apply in the order they are queued,
// whichever goroutine queues them (bbolt's one writer): an optional capability, checked by
// type assertion. QueueStartExecution queues StartExecution's write and returns once it is
// queued, so that every write queued afterwards (the execution's step commits) applies after
// it, in its transaction or a later one, and is refused if it was (a commit of an execution
// that does not exist is ErrNotFound). The start may wait a little for a write to share its
// transaction. wait blocks until it is written and returns StartExecution's answer; it may be
// called more than once and from any goroutine (each call returns the same answer).
type QueuedStarter interface {
	QueueStartExecution(ctx context.Context, s ExecutionStart) (wait func() (StartResult, error), err error)
}

// StartCheck is StartExecution's decision on run r for execution execID of instance
// instanceID with local run localRunID (backends and callers that mark a run by other means
// share it): mark reports that the run is to be marked running; false with a nil error means
// nothing to write (already marked by this execution, or final naming it); an error wrapping
// ErrRunMoved, with the reason, refuses the start.
func StartCheck(r *messages.SharedRun, execID, instanceID, localRunID string) (mark bool, err error) {
	switch {
	case r.ExecutionId != "" && r.ExecutionId != execID:
		return false, fmt.Errorf("%w: the run names execution %s", ErrRunMoved, r.ExecutionId)
	case messages.IsTerminalRun(r.Status) && r.ExecutionId == "":
		return false, fmt.Errorf("%w: the run is %s without this execution", ErrRunMoved, r.Status)
	case messages.IsTerminalRun(r.Status):
		return false, nil // this execution finished it
	case r.AssignedRuntimeInstanceId != instanceID:
		return false, fmt.Errorf("%w: assigned to %q", ErrRunMoved, r.AssignedRuntimeInstanceId)
	case r.Status != messages.RunDispatched && r.Status != messages.RunRunning && r.Status != messages.RunPaused:
		return false, fmt.Errorf("%w: run is %s", ErrRunMoved, r.Status)
	case r.Status == messages.RunRunning && r.ExecutionId == execID && r.LocalRunId == localRunID:
		return false, nil // marked by an earlier call
	}
	return true, nil
}

// MarkStarted applies StartExecution's mark to r: running on instanceID under execID and
// localRunID.
func MarkStarted(r *messages.SharedRun, execID, instanceID, localRunID string) {
	r.Status, r.ExecutionId, r.LocalRunId, r.AssignedRuntimeInstanceId = messages.RunRunning, execID, localRunID, instanceID
}
