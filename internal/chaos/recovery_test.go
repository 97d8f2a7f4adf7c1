package chaos

import (
	"reflect"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

func TestRecoveries(t *testing.T) {
	onset := at(1000)
	ledgers := map[string][]httpapi.LedgerEntry{
		// Killed node: the recoverer's entry, the new activation's entry, then a step.
		"killed": {entry(1, 900, messages.KindStepStarted, "a", 1), entry(2, 2500, messages.KindRecovery, "", 2),
			entry(3, 2600, messages.KindRecovery, "", 3), entry(4, 2700, messages.KindStepStarted, "a", 3)},
		// Partitioned node: it kept committing until fenced; what counts is after the recovery.
		"zombie": {entry(1, 1100, messages.KindStepSucceeded, "a", 1), entry(2, 3000, messages.KindRecovery, "", 2),
			entry(3, 4000, messages.KindStepStarted, "b", 2)},
		// Paused briefly, never fenced: it goes on when resumed.
		"resumed": {entry(1, 900, messages.KindStepStarted, "a", 1), entry(2, 1800, messages.KindStepSucceeded, "a", 1)},
		// Finished before the fault: the harness's stale view placed it, but it was not affected.
		"done": {entry(1, 990, messages.KindRunSucceeded, "", 1)},
		// Never progressed after the fault.
		"stuck": {entry(1, 900, messages.KindStepStarted, "a", 1)},
		// A recovery after the next fault's onset belongs to that fault.
		"later": {entry(1, 1500, messages.KindStepSucceeded, "a", 1), entry(2, 9500, messages.KindRecovery, "", 2),
			entry(3, 9600, messages.KindStepStarted, "b", 2)},
	}
	faults := []FaultRecord{
		{Event: Event{Fault: FaultKill}, Onset: onset, Affected: []string{"killed", "zombie", "resumed", "done", "stuck", "later"}},
		{Event: Event{Fault: FaultPause}, Onset: at(9000)},
	}
	got := Recoveries(faults, ledgers)
	if len(got) != 2 {
		t.Fatalf("%d recoveries, want 2", len(got))
	}
	r := got[0]
	wantTimes := []time.Duration{500 * time.Millisecond, 800 * time.Millisecond, 1700 * time.Millisecond, 3000 * time.Millisecond}
	if !reflect.DeepEqual(r.Times, wantTimes) {
		t.Fatalf("times %v, want %v", r.Times, wantTimes)
	}
	if r.Unrecovered != 1 || r.Slowest != "zombie" || r.Max() != 3*time.Second {
		t.Fatalf("unrecovered %d, slowest %q, max %s", r.Unrecovered, r.Slowest, r.Max())
	}
	if want := []string{"killed", "zombie", "resumed", "stuck", "later"}; !reflect.DeepEqual(r.Record.Affected, want) {
		t.Fatalf("affected %v, want %v", r.Record.Affected, want)
	}
	if got[1].Max() != 0 || got[1].Slowest != "" {
		t.Fatalf("a fault affecting nothing: %+v", got[1])
	}
}

func TestSummarizeRecoveries(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	rs := []FaultRecovery{
		{Record: FaultRecord{Event: Event{Fault: FaultPartition}}, Times: ms(300, 900)},
		{Record: FaultRecord{Event: Event{Fault: FaultKill}}, Times: ms(100, 400, 2000)},
		{Record: FaultRecord{Event: Event{Fault: FaultKill}}, Times: ms(700), Unrecovered: 1},
		{Record: FaultRecord{Event: Event{Fault: FaultKill}}},
	}
	want := []KindRecovery{
		{Fault: FaultKill, Faults: 3, Runs: 5, P50: 400 * time.Millisecond, Max: 2 * time.Second, Unrecovered: 1},
		{Fault: FaultPartition, Faults: 1, Runs: 2, P50: 300 * time.Millisecond, Max: 900 * time.Millisecond},
	}
	if got := SummarizeRecoveries(rs); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
