package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Property names, as they appear in the report.
const (
	PropRunsFinished   = "runs_finished"
	PropNoDoubleCommit = "no_double_commit"
	PropNoStaleEpoch   = "no_stale_epoch"
	PropExecutionKept  = "execution_id_kept"
	PropUsage          = "usage_equals_ledger"
	PropReservations   = "reservations_drained"
)

// maxViolations caps the violations a Property lists; the rest are counted.
const maxViolations = 20

// Property is the verdict on one property: whether it held, a one-line summary, and the
// violations found (at most 20, then a count of the others).
type Property struct {
	Name       string   `json:"name"`
	Held       bool     `json:"held"`
	Summary    string   `json:"summary"`
	Violations []string `json:"violations,omitempty"`
}

// violations accumulates what breaks a property.
type violations struct {
	list  []string
	count int
}

func (v *violations) addf(format string, a ...any) {
	v.count++
	if len(v.list) < maxViolations {
		v.list = append(v.list, fmt.Sprintf(format, a...))
	}
}

// property builds the verdict: held when nothing was added.
func (v *violations) property(name, summary string) Property {
	p := Property{Name: name, Held: v.count == 0, Summary: summary, Violations: v.list}
	if v.count > len(v.list) {
		p.Violations = append(p.Violations, fmt.Sprintf("... and %d more", v.count-len(v.list)))
	}
	return p
}

// Check judges every property over ev, in report order. It is a pure function.
func Check(ev Evidence) []Property {
	return []Property{
		CheckRunsFinished(ev.Runs),
		CheckNoDoubleCommit(ev.Runs, ev.Calls, ev.Frozen, ev.Senders),
		CheckNoStaleEpoch(ev.Runs),
		CheckExecutionKept(ev.Runs),
		CheckUsage(ev.Runs),
		CheckReservations(ev.Reservations),
	}
}

// CheckRunsFinished holds when every acknowledged run succeeded (the workload's pipelines
// cannot fail on their own, so a failed run is work a fault destroyed).
func CheckRunsFinished(runs []RunEvidence) Property {
	var v violations
	ok := 0
	for _, r := range runs {
		switch r.Status {
		case messages.RunSucceeded:
			ok++
		case messages.RunFailed, messages.RunCancelled:
			v.addf("run %s (%s): %s: %s", r.ID, r.Tenant, r.Status, r.Reason)
		default:
			v.addf("run %s (%s): unfinished (%s)%s", r.ID, r.Tenant, orDash(r.Status), lastEntry(r.Ledger))
		}
	}
	return v.property(PropRunsFinished, fmt.Sprintf("%d of %d acknowledged runs succeeded", ok, len(runs)))
}

// CheckNoDoubleCommit holds when no step has two step_succeeded entries and no handler call of
// a committed step arrived after its commit (its handler ran again once committed). A call
// from a node process that was frozen (SIGSTOP) when the step was committed is the delivery,
// on SIGCONT, of work that process had in flight before it froze: it is counted in the
// summary, not as a violation.
func CheckNoDoubleCommit(runs []RunEvidence, calls map[string][]Call, frozen []Frozen, senders map[int]string) Property {
	var v violations
	committed, twice, late, thawed := 0, 0, 0, 0
	for _, r := range runs {
		seqs := map[string][]int64{}
		for _, e := range r.Ledger {
			if e.Kind != messages.KindStepSucceeded {
				continue
			}
			seqs[e.StepID] = append(seqs[e.StepID], e.Seq)
			var after []Call
			for _, c := range calls[orElse(e.ExecutionID, r.ExecutionID)+"/"+e.StepID] {
				switch _, wasFrozen := frozenAt(frozen, c.PID, e.At); {
				case !c.At.After(e.At):
				case wasFrozen:
					thawed++
				default:
					after = append(after, c)
				}
			}
			if len(after) > 0 {
				late++
				v.addf("run %s step %s: handler called %d time(s) after its commit at %s (first %s later, from %s)",
					r.ID, e.StepID, len(after), e.At.Format(timeFormat), after[0].At.Sub(e.At).Round(time.Millisecond), sender(senders, after[0].PID))
			}
		}
		for _, step := range sortedKeys(seqs) {
			committed++
			if s := seqs[step]; len(s) > 1 {
				twice++
				v.addf("run %s step %s: %d step_succeeded entries (seq %s)", r.ID, step, len(s), joinInts(s))
			}
		}
	}
	return v.property(PropNoDoubleCommit, fmt.Sprintf("%d steps committed; %d committed more than once; %d run again after their commit; "+
		"%d in-flight calls of a frozen node delivered after it", committed, twice, late, thawed))
}

// sender names a call's sender: "n2 (pid 123)".
func sender(names map[int]string, pid int) string {
	if pid == 0 {
		return "an unknown process"
	}
	return orElse(names[pid], "?") + " (pid " + strconv.Itoa(pid) + ")"
}

// CheckNoStaleEpoch holds when, in each run's ledger (in Seq order), no entry carries an epoch
// lower than one an earlier entry of the run carried, and no committed step record finished
// at an epoch lower than that of an activation (execution_started or recovery entry) that
// began before it finished. The "fenced" entry is exempt: it records, by design, the epoch of
// the activation that was fenced.
func CheckNoStaleEpoch(runs []RunEvidence) Property {
	var v violations
	checked := 0
	for _, r := range runs {
		var top int64
		for _, e := range r.Ledger {
			if e.Epoch <= 0 || e.Kind == messages.KindFenced {
				continue
			}
			checked++
			if e.Epoch < top {
				v.addf("run %s: %s at epoch %d after epoch %d (seq %d)", r.ID, describeEntry(e.Kind, e.StepID), e.Epoch, top, e.Seq)
			}
			top = max(top, e.Epoch)
		}
		for _, s := range r.Steps {
			if s.FinishedAt.IsZero() {
				continue
			}
			checked++
			for _, e := range r.Ledger {
				began := e.Kind == messages.KindRecovery || e.Kind == messages.KindExecutionStarted
				if began && e.Epoch > s.Epoch && e.At.Before(s.FinishedAt) {
					v.addf("run %s: step %s record (%s) at epoch %d finished at %s, after epoch %d began at %s (seq %d)",
						r.ID, s.StepID, s.Status, s.Epoch, s.FinishedAt.Format(timeFormat), e.Epoch, e.At.Format(timeFormat), e.Seq)
					break
				}
			}
		}
	}
	return v.property(PropNoStaleEpoch, fmt.Sprintf("%d epoch-stamped ledger entries and step records checked; %d stale", checked, v.count))
}

// CheckExecutionKept holds when each run had one execution id: the same in every ledger entry
// that names one, in every poll that saw one and in its final record.
func CheckExecutionKept(runs []RunEvidence) Property {
	var v violations
	for _, r := range runs {
		var ids []string
		seen := map[string]bool{}
		note := func(id string) {
			if id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		for _, id := range r.Observed {
			note(id)
		}
		for _, e := range r.Ledger {
			note(e.ExecutionID)
		}
		note(r.ExecutionID)
		if len(ids) > 1 {
			v.addf("run %s: execution ids %s", r.ID, strings.Join(ids, ", "))
		}
	}
	return v.property(PropExecutionKept, fmt.Sprintf("%d runs; %d changed execution id", len(runs), v.count))
}

// CheckUsage holds when each run's "step" usage events match its step_succeeded entries one
// for one, step by step.
func CheckUsage(runs []RunEvidence) Property {
	var v violations
	events, committed := 0, 0
	for _, r := range runs {
		want := map[string]int{}
		for _, e := range r.Ledger {
			if e.Kind == messages.KindStepSucceeded {
				want[e.StepID]++
				committed++
			}
		}
		var diffs []string
		for _, step := range sortedKeys(union(want, r.UsageSteps)) {
			events += r.UsageSteps[step]
			if got := r.UsageSteps[step]; got != want[step] {
				diffs = append(diffs, fmt.Sprintf("%s: %d usage events for %d commits", step, got, want[step]))
			}
		}
		if len(diffs) > 0 {
			v.addf("run %s (%s): %s", r.ID, r.Tenant, strings.Join(diffs, "; "))
		}
	}
	return v.property(PropUsage, fmt.Sprintf("%d step usage events for %d step_succeeded entries; %d runs differ", events, committed, v.count))
}

// CheckReservations holds when no runtime instance holds a run slot any more.
func CheckReservations(holds map[string]int) Property {
	var v violations
	total := 0
	for _, id := range sortedKeys(holds) {
		if n := holds[id]; n != 0 {
			total += n
			v.addf("instance %s: %d live holds", id, n)
		}
	}
	return v.property(PropReservations, fmt.Sprintf("%d live holds on %d instances", total, len(holds)))
}

// lastEntry describes the last ledger entry, where an unfinished run stopped: "; last:
// step_started b on i1 at 03:04:05.610 (epoch 3)".
func lastEntry(ledger []httpapi.LedgerEntry) string {
	if len(ledger) == 0 {
		return ""
	}
	e := ledger[len(ledger)-1]
	return fmt.Sprintf("; last: %s on %s at %s (epoch %d)", describeEntry(e.Kind, e.StepID), orDash(e.RuntimeInstanceID),
		e.At.Format(timeFormat), e.Epoch)
}

// timeFormat prints ledger and call times.
const timeFormat = "15:04:05.000"

func describeEntry(kind, step string) string {
	if step == "" {
		return kind
	}
	return kind + " " + step
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDash(s string) string { return orElse(s, "-") }

func joinInts(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, ", ")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// union returns a map with the keys of a and b.
func union(a, b map[string]int) map[string]int {
	out := make(map[string]int, len(a)+len(b))
	for k := range a {
		out[k] = 0
	}
	for k := range b {
		out[k] = 0
	}
	return out
}
