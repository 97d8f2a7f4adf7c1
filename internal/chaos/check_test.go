package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// t0 is the base time of the hand-built ledgers.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// entry builds a ledger entry of execution "x1".
func entry(seq int64, ms int, kind, step string, epoch int64) httpapi.LedgerEntry {
	return httpapi.LedgerEntry{Seq: seq, At: at(ms), Kind: kind, SharedRunID: "r1", ExecutionID: "x1", StepID: step, Epoch: epoch}
}

// goodRun is a run that started at epoch 1, lost its node after step a, resumed at epoch 2 and
// succeeded: every property holds for it.
func goodRun() RunEvidence {
	return RunEvidence{ID: "r1", Tenant: "t", Status: messages.RunSucceeded, ExecutionID: "x1", Observed: []string{"x1"},
		Ledger: []httpapi.LedgerEntry{
			{Seq: 1, At: at(0), Kind: messages.KindSubmitted, SharedRunID: "r1"},
			entry(2, 10, messages.KindExecutionStarted, "", 1),
			entry(3, 20, messages.KindStepStarted, "a", 1),
			entry(4, 100, messages.KindStepSucceeded, "a", 1),
			entry(5, 110, messages.KindStepStarted, "b", 1),
			entry(6, 500, messages.KindRecovery, "", 2),
			entry(7, 600, messages.KindRecovery, "", 3),
			entry(8, 610, messages.KindStepStarted, "b", 3),
			entry(9, 700, messages.KindStepSucceeded, "b", 3),
			entry(10, 720, messages.KindRunSucceeded, "", 3),
		},
		Steps: []StepRecord{
			{StepID: "a", Status: messages.StepSucceeded, Epoch: 1, FinishedAt: at(95)},
			{StepID: "b", Status: messages.StepSucceeded, Epoch: 3, FinishedAt: at(695)},
		},
		UsageSteps: map[string]int{"a": 1, "b": 1},
	}
}

// goodCalls are the counting server's calls of goodRun: b was called by the lost activation
// and again by the new one, both before b's commit.
func goodCalls() map[string][]Call {
	return map[string][]Call{"x1/a": {{At: at(25)}}, "x1/b": {{At: at(115)}, {At: at(615)}}}
}

func TestCheck_goodRunHoldsEveryProperty(t *testing.T) {
	ev := Evidence{Runs: []RunEvidence{goodRun()}, Calls: goodCalls(), Reservations: map[string]int{"i1": 0}}
	for _, p := range Check(ev) {
		if !p.Held {
			t.Errorf("%s failed: %s %v", p.Name, p.Summary, p.Violations)
		}
	}
}

func TestCheck_eachViolation(t *testing.T) {
	tests := []struct {
		name    string
		prop    string
		mutate  func(*Evidence)
		wantSub string
	}{
		{"run still running", PropRunsFinished, func(ev *Evidence) {
			ev.Runs[0].Status, ev.Runs[0].Ledger = messages.RunRunning, ev.Runs[0].Ledger[:8]
			delete(ev.Runs[0].UsageSteps, "b")
		}, "unfinished (running); last: step_started b on - at 03:04:05.610 (epoch 3)"},
		{"run failed", PropRunsFinished, func(ev *Evidence) {
			ev.Runs[0].Status, ev.Runs[0].Reason = messages.RunFailed, "step b failed"
		}, "failed: step b failed"},
		{"run never read", PropRunsFinished, func(ev *Evidence) { ev.Runs[0].Status = "" }, "unfinished (-)"},
		{"step committed twice", PropNoDoubleCommit, func(ev *Evidence) {
			ev.Runs[0].Ledger = append(ev.Runs[0].Ledger, entry(11, 800, messages.KindStepSucceeded, "b", 3))
			ev.Runs[0].UsageSteps["b"] = 2 // usage follows the ledger: only no_double_commit fails
		}, "b: 2 step_succeeded entries (seq 9, 11)"},
		{"committed step called again", PropNoDoubleCommit, func(ev *Evidence) {
			ev.Calls["x1/a"] = append(ev.Calls["x1/a"], Call{At: at(650), PID: 42})
			ev.Senders = map[int]string{42: "n2"}
		}, "a: handler called 1 time(s) after its commit at 03:04:05.100 (first 550ms later, from n2 (pid 42))"},
		{"called again by a node frozen before the commit but resumed before it", PropNoDoubleCommit, func(ev *Evidence) {
			ev.Calls["x1/b"] = append(ev.Calls["x1/b"], Call{At: at(900), PID: 7})
			ev.Frozen = []Frozen{{PID: 7, From: at(120), To: at(650)}}
		}, "b: handler called 1 time(s)"},
		{"stale step commit after a recovery", PropNoStaleEpoch, func(ev *Evidence) {
			ev.Runs[0].Ledger = append(ev.Runs[0].Ledger[:8], entry(9, 700, messages.KindStepSucceeded, "b", 1), ev.Runs[0].Ledger[9])
		}, "step_succeeded b at epoch 1 after epoch 3 (seq 9)"},
		{"stale recovery entry after a newer activation", PropNoStaleEpoch, func(ev *Evidence) {
			ev.Runs[0].Ledger[5], ev.Runs[0].Ledger[6] = entry(6, 500, messages.KindRecovery, "", 3), entry(7, 600, messages.KindRecovery, "", 2)
		}, "recovery at epoch 2 after epoch 3 (seq 7)"},
		{"stale step record", PropNoStaleEpoch, func(ev *Evidence) {
			ev.Runs[0].Steps[1] = StepRecord{StepID: "b", Status: messages.StepSucceeded, Epoch: 1, FinishedAt: at(650)}
		}, "step b record (succeeded) at epoch 1 finished at 03:04:05.650, after epoch 2 began"},
		{"execution id changed while polled", PropExecutionKept, func(ev *Evidence) {
			ev.Runs[0].Observed = []string{"x1", "x2"}
		}, "execution ids x1, x2"},
		{"execution id changed in the ledger", PropExecutionKept, func(ev *Evidence) {
			ev.Runs[0].Ledger[7].ExecutionID = "x9"
		}, "execution ids x1, x9"},
		{"final record has another id", PropExecutionKept, func(ev *Evidence) { ev.Runs[0].ExecutionID = "x3" }, "x1, x3"},
		{"usage counted twice", PropUsage, func(ev *Evidence) { ev.Runs[0].UsageSteps["b"] = 2 }, "b: 2 usage events for 1 commits"},
		{"usage missing", PropUsage, func(ev *Evidence) { delete(ev.Runs[0].UsageSteps, "a") }, "a: 0 usage events for 1 commits"},
		{"usage of a step never committed", PropUsage, func(ev *Evidence) { ev.Runs[0].UsageSteps["c"] = 1 }, "c: 1 usage events for 0 commits"},
		{"reservation left", PropReservations, func(ev *Evidence) { ev.Reservations["i2"] = 2 }, "instance i2: 2 live holds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := Evidence{Runs: []RunEvidence{goodRun()}, Calls: goodCalls(), Reservations: map[string]int{"i1": 0}}
			tt.mutate(&ev)
			for _, p := range Check(ev) {
				if p.Name != tt.prop {
					if !p.Held {
						t.Errorf("%s failed too: %v", p.Name, p.Violations)
					}
					continue
				}
				if p.Held {
					t.Fatalf("%s held: %s", p.Name, p.Summary)
				}
				if len(p.Violations) == 0 || !strings.Contains(p.Violations[0], tt.wantSub) {
					t.Fatalf("%s violations %q, want one containing %q", p.Name, p.Violations, tt.wantSub)
				}
			}
		})
	}
}

func TestCheckNoDoubleCommit_frozenNodeDeliversInFlightCall(t *testing.T) {
	calls := goodCalls()
	// Node pid 7 froze at 120 ms with b's first attempt in flight; the new owner committed b at
	// 700 ms; SIGCONT at 900 ms delivered the frozen request at 905 ms.
	calls["x1/b"] = append(calls["x1/b"], Call{At: at(905), PID: 7})
	p := CheckNoDoubleCommit([]RunEvidence{goodRun()}, calls, []Frozen{{PID: 7, From: at(120), To: at(900)}}, nil)
	if !p.Held || !strings.Contains(p.Summary, "1 in-flight calls of a frozen node") {
		t.Fatalf("got %+v", p)
	}
	// The same call from another process is a violation.
	calls["x1/b"][2].PID = 8
	if p := CheckNoDoubleCommit([]RunEvidence{goodRun()}, calls, []Frozen{{PID: 7, From: at(120), To: at(900)}}, nil); p.Held {
		t.Fatalf("a call from an unfrozen process held: %+v", p)
	}
}

func TestCheckNoStaleEpoch_fencedEntryIsExempt(t *testing.T) {
	r := goodRun()
	r.Ledger = append(r.Ledger, entry(11, 900, messages.KindFenced, "", 1))
	if p := CheckNoStaleEpoch([]RunEvidence{r}); !p.Held {
		t.Fatalf("a fenced entry at the fenced epoch failed the property: %v", p.Violations)
	}
}

func TestViolations_capped(t *testing.T) {
	holds := map[string]int{}
	for i := range 30 {
		holds[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = 1
	}
	p := CheckReservations(holds)
	if p.Held || len(p.Violations) != maxViolations+1 || p.Violations[maxViolations] != "... and 10 more" {
		t.Fatalf("got %d violations, last %q", len(p.Violations), p.Violations[len(p.Violations)-1])
	}
}
