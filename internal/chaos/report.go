package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dairuntime/dair/httpapi"
)

// PropFaultsInjected is the harness's own property: every scheduled fault was injected and
// undone (a node that does not come back after a kill fails it).
const PropFaultsInjected = "faults_injected"

// Duration is a time.Duration that encodes in JSON as a Go duration string ("1.25s").
type Duration time.Duration

// MarshalJSON encodes d as a quoted Go duration, rounded to the millisecond.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Round(time.Millisecond).String())
}

// UnmarshalJSON decodes a quoted Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("chaos: duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("chaos: duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).Round(time.Millisecond).String() }

// Report is the outcome of a chaos run, printed as text by Print or as JSON (snake_case).
type Report struct {
	Seed       int64           `json:"seed"`
	Nodes      int             `json:"nodes"`
	Runs       int             `json:"runs"`
	Faults     []Fault         `json:"faults"`
	Duration   Duration        `json:"duration"`
	Elapsed    Duration        `json:"elapsed"`
	Workload   WorkloadSummary `json:"workload"`
	FaultLog   []FaultOutcome  `json:"fault_log"`
	Recovery   []RecoveryStats `json:"recovery"`
	Properties []Property      `json:"properties"`
	// Passed is true when every property held: the exit status of `dair chaos` is 0.
	Passed bool   `json:"passed"`
	LogDir string `json:"log_dir,omitempty"`
}

// WorkloadSummary counts the workload's runs. NotAcknowledged lists the submissions that no
// node acknowledged (they are not judged: nothing was promised for them).
type WorkloadSummary struct {
	Submitted       int      `json:"submitted"`
	Acknowledged    int      `json:"acknowledged"`
	Succeeded       int      `json:"succeeded"`
	Failed          int      `json:"failed"`
	Unfinished      int      `json:"unfinished"`
	NotAcknowledged []string `json:"not_acknowledged,omitempty"`
}

// FaultOutcome is one injected fault in the report. At is the scheduled offset; Onset and
// Restored are wall-clock times (Restored is null when the undo failed).
type FaultOutcome struct {
	Fault       Fault      `json:"fault"`
	Target      string     `json:"target"`
	At          Duration   `json:"at"`
	Hold        Duration   `json:"hold"`
	Onset       time.Time  `json:"onset"`
	Restored    *time.Time `json:"restored"`
	Affected    int        `json:"affected_runs"`
	Unrecovered int        `json:"unrecovered_runs"`
	RecoveryMax Duration   `json:"recovery_max"`
	SlowestRun  string     `json:"slowest_run,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// RecoveryStats is the recovery of one fault kind: over every affected run of its faults, the
// median and longest time from the fault's onset to the run progressing again.
type RecoveryStats struct {
	Fault       Fault    `json:"fault"`
	Faults      int      `json:"faults"`
	Runs        int      `json:"affected_runs"`
	P50         Duration `json:"p50"`
	Max         Duration `json:"max"`
	Unrecovered int      `json:"unrecovered_runs"`
}

// CheckFaultsInjected holds when every one of the scheduled faults was injected and undone.
func CheckFaultsInjected(records []FaultRecord, scheduled int) Property {
	var v violations
	done := 0
	for _, r := range records {
		if r.Err != "" {
			v.addf("%s %s at +%s: %s", r.Event.Fault, orElse(r.Target, r.Event.Target()), r.Event.At, r.Err)
			continue
		}
		done++
	}
	if len(records) < scheduled {
		v.addf("%d scheduled faults were not reached", scheduled-len(records))
	}
	return v.property(PropFaultsInjected, fmt.Sprintf("%d of %d scheduled faults injected and undone", done, scheduled))
}

// report assembles the Report of a finished run.
func (h *harness) report(start time.Time, ev Evidence, ledgers map[string][]httpapi.LedgerEntry, faults []FaultRecord) *Report {
	rep := &Report{Seed: h.cfg.Seed, Nodes: h.cfg.Nodes, Runs: h.cfg.Runs, Faults: h.cfg.Faults,
		Duration: Duration(h.cfg.Duration), Elapsed: Duration(time.Since(start))}
	c := h.track.counts()
	rep.Workload = WorkloadSummary{Submitted: c.submitted, Acknowledged: c.acked}
	for _, r := range ev.Runs {
		switch {
		case r.Status == "succeeded":
			rep.Workload.Succeeded++
		case r.Status == "failed" || r.Status == "cancelled":
			rep.Workload.Failed++
		default:
			rep.Workload.Unfinished++
		}
	}
	h.track.mu.Lock()
	rep.Workload.NotAcknowledged = append([]string(nil), h.track.gaveUp...)
	h.track.mu.Unlock()
	recs := Recoveries(faults, ledgers)
	for _, r := range recs {
		rep.FaultLog = append(rep.FaultLog, faultOutcome(r))
	}
	for _, k := range SummarizeRecoveries(recs) {
		rep.Recovery = append(rep.Recovery, RecoveryStats{Fault: k.Fault, Faults: k.Faults, Runs: k.Runs,
			P50: Duration(k.P50), Max: Duration(k.Max), Unrecovered: k.Unrecovered})
	}
	rep.Properties = append(Check(ev), CheckFaultsInjected(faults, len(h.sched.Events)))
	rep.Passed = true
	for _, p := range rep.Properties {
		rep.Passed = rep.Passed && p.Held
	}
	return rep
}

func faultOutcome(r FaultRecovery) FaultOutcome {
	f := r.Record
	target := f.Target
	if f.Event.Node == Busiest {
		target = "busiest:" + target
	}
	out := FaultOutcome{Fault: f.Event.Fault, Target: target, At: Duration(f.Event.At), Hold: Duration(f.Event.Hold),
		Onset: f.Onset.UTC(), Affected: len(f.Affected), Unrecovered: r.Unrecovered, RecoveryMax: Duration(r.Max()), SlowestRun: r.Slowest, Error: f.Err}
	if !f.Restored.IsZero() {
		t := f.Restored.UTC()
		out.Restored = &t
	}
	return out
}

// Print writes the report as text: the workload, each fault, the recovery times per kind and
// each property's verdict with its violations.
func (r *Report) Print(w io.Writer) error {
	var b strings.Builder
	names := make([]string, len(r.Faults))
	for i, f := range r.Faults {
		names[i] = f.String()
	}
	fmt.Fprintf(&b, "dair chaos report: seed %d, %d nodes, %d runs, faults %s over %s (elapsed %s)\n",
		r.Seed, r.Nodes, r.Runs, orDash(strings.Join(names, ",")), r.Duration, r.Elapsed)
	wl := r.Workload
	fmt.Fprintf(&b, "workload: %d submitted, %d acknowledged, %d succeeded, %d failed, %d unfinished, %d never acknowledged\n",
		wl.Submitted, wl.Acknowledged, wl.Succeeded, wl.Failed, wl.Unfinished, len(wl.NotAcknowledged))
	b.WriteString("faults (recovery: onset → every affected run progressing again):\n")
	for _, f := range r.FaultLog {
		fmt.Fprintf(&b, "  %-8s %-14s %-10s held %-6s affected %3d  recovery max %-8s", "+"+f.At.String(), f.Fault, f.Target,
			f.Hold, f.Affected, f.RecoveryMax)
		if f.SlowestRun != "" {
			fmt.Fprintf(&b, " (%s)", f.SlowestRun)
		}
		if f.Unrecovered > 0 {
			fmt.Fprintf(&b, "  %d never progressed", f.Unrecovered)
		}
		if f.Error != "" {
			fmt.Fprintf(&b, "  ERROR %s", f.Error)
		}
		b.WriteString("\n")
	}
	b.WriteString("recovery per fault kind:\n")
	for _, k := range r.Recovery {
		fmt.Fprintf(&b, "  %-14s %2d faults  %3d runs  p50 %-8s max %-8s\n", k.Fault, k.Faults, k.Runs, k.P50, k.Max)
	}
	b.WriteString("properties:\n")
	failed := []string{}
	for _, p := range r.Properties {
		verdict := "PASS"
		if !p.Held {
			verdict = "FAIL"
			failed = append(failed, p.Name)
		}
		fmt.Fprintf(&b, "  %s %-22s %s\n", verdict, p.Name, p.Summary)
		for _, v := range p.Violations {
			fmt.Fprintf(&b, "         - %s\n", v)
		}
	}
	if r.Passed {
		b.WriteString("result: PASS (every property held)\n")
	} else {
		fmt.Fprintf(&b, "result: FAIL (%s); reproduce with --seed %d\n", strings.Join(failed, ", "), r.Seed)
	}
	if r.LogDir != "" {
		fmt.Fprintf(&b, "logs: %s\n", r.LogDir)
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}
