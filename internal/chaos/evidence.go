package chaos

import (
	"time"

	"github.com/dairuntime/dair/httpapi"
)

// RunEvidence is what the harness knows of one acknowledged run once the workload is over:
// its final record, every execution id seen while following it, its ledger, its execution's
// committed step records and its usage. Check reads it; nothing in it is retained.
type RunEvidence struct {
	ID     string
	Tenant string
	// Status and Reason are the run's final status and failure reason ("" if never read).
	Status string
	Reason string
	// ExecutionID is the final record's execution id.
	ExecutionID string
	// Observed lists every distinct non-empty execution id seen while polling, in order.
	Observed []string
	// Ledger is the run's ledger in Seq order.
	Ledger []httpapi.LedgerEntry
	// Steps are the committed step records of its execution, from the store.
	Steps []StepRecord
	// UsageSteps counts the tenant's "step" usage events of this run by step id.
	UsageSteps map[string]int
}

// StepRecord is a committed step state with the epoch of the write that stored it.
type StepRecord struct {
	StepID     string
	Status     string
	Epoch      int64
	FinishedAt time.Time // zero while running
}

// Evidence is everything Check judges.
type Evidence struct {
	Runs []RunEvidence
	// Calls holds the counting server's calls by Idempotency-Key, "<execution_id>/<step_id>".
	Calls map[string][]Call
	// Frozen lists when each paused node process was stopped (SIGSTOP to SIGCONT).
	Frozen []Frozen
	// Senders names the node of each pid that may appear in Calls.
	Senders map[int]string
	// Reservations counts the live run-slot holds per runtime instance id, after the runs
	// finished and the settle wait.
	Reservations map[string]int
}

// Frozen is a window during which a node process (by pid) was SIGSTOPped.
type Frozen struct {
	PID      int
	Node     string
	From, To time.Time
}

// frozenAt returns the window in which process pid was frozen at t, if any.
func frozenAt(windows []Frozen, pid int, t time.Time) (Frozen, bool) {
	for _, w := range windows {
		if pid != 0 && w.PID == pid && !t.Before(w.From) && !t.After(w.To) {
			return w, true
		}
	}
	return Frozen{}, false
}
