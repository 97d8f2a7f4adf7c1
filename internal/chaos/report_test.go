package chaos

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	restored := t0.Add(3 * time.Second)
	return &Report{Seed: 1, Nodes: 3, Runs: 30, Faults: []Fault{FaultKill, FaultPause}, Duration: Duration(25 * time.Second),
		Elapsed:  Duration(31500 * time.Millisecond),
		Workload: WorkloadSummary{Submitted: 30, Acknowledged: 30, Succeeded: 29, Unfinished: 1},
		FaultLog: []FaultOutcome{{Fault: FaultKill, Target: "busiest:n2", At: Duration(3 * time.Second), Hold: Duration(2 * time.Second),
			Onset: t0, Restored: &restored, Affected: 4, RecoveryMax: Duration(1250 * time.Millisecond), SlowestRun: "r9"}},
		Recovery: []RecoveryStats{{Fault: FaultKill, Faults: 1, Runs: 4, P50: Duration(time.Second), Max: Duration(1250 * time.Millisecond)}},
		Properties: []Property{{Name: PropRunsFinished, Summary: "29 of 30 acknowledged runs succeeded",
			Violations: []string{"run r3 (t): unfinished (running)"}}, {Name: PropUsage, Held: true, Summary: "ok"}},
	}
}

func TestReport_Print(t *testing.T) {
	var b strings.Builder
	if err := sampleReport().Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"dair chaos report: seed 1, 3 nodes, 30 runs, faults kill,pause over 25s (elapsed 31.5s)",
		"workload: 30 submitted, 30 acknowledged, 29 succeeded, 0 failed, 1 unfinished, 0 never acknowledged",
		"  +3s      kill           busiest:n2 held 2s     affected   4  recovery max 1.25s    (r9)",
		"  kill            1 faults    4 runs  p50 1s       max 1.25s",
		"  FAIL runs_finished          29 of 30 acknowledged runs succeeded",
		"         - run r3 (t): unfinished (running)",
		"  PASS usage_equals_ledger    ok",
		"result: FAIL (runs_finished); reproduce with --seed 1",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing line %q in\n%s", want, b.String())
		}
	}
}

func TestReport_JSONRoundTrip(t *testing.T) {
	rep := sampleReport()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"faults":["kill","pause"]`, `"duration":"25s"`, `"recovery_max":"1.25s"`, `"passed":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.FaultLog[0].Onset = back.FaultLog[0].Onset.UTC()
	*back.FaultLog[0].Restored = back.FaultLog[0].Restored.UTC()
	if !reflect.DeepEqual(&back, rep) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", back, *rep)
	}
}

func TestCheckFaultsInjected(t *testing.T) {
	ok := FaultRecord{Event: Event{Fault: FaultKill, Node: 0}, Target: "n1", Injected: true}
	bad := FaultRecord{Event: Event{Fault: FaultKill, Node: Busiest, At: time.Second}, Target: "n2", Injected: true,
		Err: "undo: node n2 not ready"}
	tests := []struct {
		name      string
		records   []FaultRecord
		scheduled int
		held      bool
		want      string
	}{
		{"all done", []FaultRecord{ok, ok}, 2, true, "2 of 2 scheduled faults injected and undone"},
		{"undo failed", []FaultRecord{ok, bad}, 2, false, "kill n2 at +1s: undo: node n2 not ready"},
		{"not reached", []FaultRecord{ok}, 3, false, "2 scheduled faults were not reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := CheckFaultsInjected(tt.records, tt.scheduled)
			text := p.Summary + " " + strings.Join(p.Violations, "; ")
			if p.Held != tt.held || !strings.Contains(text, tt.want) {
				t.Fatalf("got %+v, want held %v with %q", p, tt.held, tt.want)
			}
		})
	}
}
