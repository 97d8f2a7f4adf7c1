package chaos

import (
	"sort"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// FaultRecord is one fault as the harness injected it: the scheduled event, when it hit and
// when it was undone, the runs it affected, and the injection error if it could not be done.
type FaultRecord struct {
	Event Event
	// Target is the node id the fault hit ("redis" for redis-restart).
	Target string
	// PID is the pid of the node process hit (0 for redis-restart).
	PID      int
	Onset    time.Time
	Restored time.Time
	// Affected are the runs the fault could stall: for a node fault, the runs then dispatched
	// to or running on an instance of that node; for redis-restart, every dispatched or
	// running run.
	Affected []string
	// Injected is true once the fault hit (even if its undo then failed).
	Injected bool
	Err      string
}

// FaultRecovery is how the runs a fault affected got going again: for each affected run, the
// time from the fault's onset to its first progress (a step or terminal ledger entry) after
// the last recovery entry of that run before the next fault.
type FaultRecovery struct {
	Record FaultRecord
	// Times holds the recovery time of each affected run that progressed again, ascending.
	Times []time.Duration
	// Unrecovered counts the affected runs that never progressed again.
	Unrecovered int
	// Slowest is the affected run that took longest to progress again ("" when none did).
	Slowest string
}

// Max returns the longest recovery time (0 when no run recovered).
func (r FaultRecovery) Max() time.Duration {
	if len(r.Times) == 0 {
		return 0
	}
	return r.Times[len(r.Times)-1]
}

// progressKinds are the ledger entries that show a run moving forward.
var progressKinds = map[string]bool{
	messages.KindStepStarted: true, messages.KindStepSucceeded: true, messages.KindStepFailed: true,
	messages.KindRunSucceeded: true, messages.KindRunFailed: true, messages.KindRunCancelled: true,
}

// terminalKinds are the ledger entries that end a run.
var terminalKinds = map[string]bool{
	messages.KindRunSucceeded: true, messages.KindRunFailed: true, messages.KindRunCancelled: true,
}

// Recoveries measures each fault's recovery from the ledgers (by run id). faults must be in
// onset order; a fault's window ends at the next fault's onset. A run the harness saw placed
// but whose ledger shows it finished by the onset was not affected: it is dropped from the
// returned record's Affected. It is a pure function.
func Recoveries(faults []FaultRecord, ledgers map[string][]httpapi.LedgerEntry) []FaultRecovery {
	out := make([]FaultRecovery, 0, len(faults))
	for i, f := range faults {
		end := time.Time{}
		if i+1 < len(faults) {
			end = faults[i+1].Onset
		}
		fr := FaultRecovery{Record: f}
		var affected []string
		for _, id := range f.Affected {
			if !finishedBy(ledgers[id], f.Onset) {
				affected = append(affected, id)
			}
		}
		fr.Record.Affected = affected
		for _, id := range affected {
			d, ok := runRecovery(ledgers[id], f.Onset, end)
			if !ok {
				fr.Unrecovered++
				continue
			}
			if len(fr.Times) == 0 || d > fr.Max() {
				fr.Slowest = id
			}
			fr.Times = append(fr.Times, d)
			sort.Slice(fr.Times, func(a, b int) bool { return fr.Times[a] < fr.Times[b] })
		}
		out = append(out, fr)
	}
	return out
}

// finishedBy reports whether the ledger has a terminal entry at or before t.
func finishedBy(ledger []httpapi.LedgerEntry, t time.Time) bool {
	for _, e := range ledger {
		if terminalKinds[e.Kind] && !e.At.After(t) {
			return true
		}
	}
	return false
}

// runRecovery returns the time from onset to the run's first progress after the later of the
// onset and its last recovery entry in (onset, end); end zero means unbounded.
func runRecovery(ledger []httpapi.LedgerEntry, onset, end time.Time) (time.Duration, bool) {
	inWindow := func(at time.Time) bool { return at.After(onset) && (end.IsZero() || at.Before(end)) }
	ref := onset
	for _, e := range ledger {
		if e.Kind == messages.KindRecovery && inWindow(e.At) && e.At.After(ref) {
			ref = e.At
		}
	}
	for _, e := range ledger {
		if progressKinds[e.Kind] && e.At.After(ref) {
			return e.At.Sub(onset), true
		}
	}
	return 0, false
}

// KindRecovery sums the recoveries of one fault kind: over every affected run of every fault
// of the kind, the median (nearest rank) and the longest recovery time.
type KindRecovery struct {
	Fault       Fault
	Faults      int
	Runs        int
	P50         time.Duration
	Max         time.Duration
	Unrecovered int
}

// SummarizeRecoveries returns one KindRecovery per fault kind present, in AllFaults order.
func SummarizeRecoveries(rs []FaultRecovery) []KindRecovery {
	var out []KindRecovery
	for _, kind := range AllFaults {
		k := KindRecovery{Fault: kind}
		var times []time.Duration
		for _, r := range rs {
			if r.Record.Event.Fault != kind {
				continue
			}
			k.Faults++
			k.Unrecovered += r.Unrecovered
			times = append(times, r.Times...)
		}
		if k.Faults == 0 {
			continue
		}
		sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
		k.Runs = len(times) + k.Unrecovered
		if len(times) > 0 {
			k.P50 = times[(len(times)+1)/2-1]
			k.Max = times[len(times)-1]
		}
		out = append(out, k)
	}
	return out
}
