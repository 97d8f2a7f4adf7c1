package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dairuntime/dair/messages"
)

// printer writes the report. It keeps the first write error (later writes are skipped) so the
// scenario code reads as a script; Run returns the error.
type printer struct {
	w     io.Writer
	color bool
	err   error
}

// newPrinter returns a printer on w, highlighting headers when w is a terminal and NO_COLOR
// is unset.
func newPrinter(w io.Writer) *printer {
	p := &printer{w: w}
	if f, ok := w.(*os.File); ok && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb" {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.color = true
		}
	}
	return p
}

func (p *printer) printf(format string, args ...any) {
	if p.err != nil {
		return
	}
	if _, err := fmt.Fprintf(p.w, format, args...); err != nil {
		p.err = fmt.Errorf("demo: write report: %w", err)
	}
}

// bold returns s highlighted on a terminal, unchanged otherwise.
func (p *printer) bold(s string) string {
	if !p.color {
		return s
	}
	return "\033[1m" + s + "\033[0m"
}

func (p *printer) title(s string) {
	p.printf("%s\n%s\n", p.bold(s), strings.Repeat("=", len(s)))
}

func (p *printer) section(s string) {
	p.printf("\n%s\n%s\n", p.bold(s), strings.Repeat("-", len(s)))
}

// table returns an aligned-column writer on the printer; rows go through row, then flush.
func (p *printer) table() *tabwriter.Writer { return tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0) }

func (p *printer) row(tw *tabwriter.Writer, cols ...string) {
	if p.err != nil {
		return
	}
	if _, err := fmt.Fprintln(tw, strings.Join(cols, "\t")); err != nil {
		p.err = fmt.Errorf("demo: write report: %w", err)
	}
}

func (p *printer) flush(tw *tabwriter.Writer) {
	if p.err != nil {
		return
	}
	if err := tw.Flush(); err != nil {
		p.err = fmt.Errorf("demo: write report: %w", err)
	}
}

// placement prints, for every run so far, the instance it ran on and the ledger's reasons.
func (d *demo) placement(ctx context.Context) error {
	d.p.section("3. Placement: where each run ran and why")
	for _, t := range d.runs {
		run, err := d.node.GetRun(ctx, t.id)
		if err != nil {
			return fmt.Errorf("demo: get run %s: %w", t.id, err)
		}
		_, entries, err := d.node.Ledger(ctx, t.id, 0)
		if err != nil {
			return fmt.Errorf("demo: read ledger of %s: %w", t.id, err)
		}
		d.p.printf("%s  %s  %s  ->  %s\n", short(t.id, 12), t.tenant, t.pipeline, d.p.bold(run.AssignedRuntimeInstanceId))
		for _, e := range entries {
			data := map[string]any{}
			if len(e.Data) > 0 {
				if err := json.Unmarshal(e.Data, &data); err != nil {
					return fmt.Errorf("demo: decode ledger data of %s: %w", t.id, err)
				}
			}
			switch e.Kind {
			case messages.KindScaleOutRequested:
				d.p.printf("    scale-out   %s: asked provider %v for %v capacity with prefix %v (request %v, max %v instances)\n",
					e.Reason, data["provider_hint"], data["isolation_mode"], data["prefix"], data["request_id"], data["max_runtime_instances"])
			case messages.KindScaleOutFulfilled, messages.KindScaleOutFailed:
				d.p.printf("    scale-out   %s (%s)\n", strings.ReplaceAll(e.Kind, "_", " "), e.Reason)
			case messages.KindAdmission:
				visible := 0
				if c, ok := data["candidates"].([]any); ok {
					visible = len(c)
				}
				target := ""
				if e.RuntimeInstanceId != "" {
					target = " -> " + e.RuntimeInstanceId
				}
				fb := ""
				if f, ok := data["fallback"].(bool); ok && f {
					fb = ", shared fallback"
				}
				d.p.printf("    admission   %v%s: %s (%d tenant-visible candidate(s)%s)\n", data["decision"], target, e.Reason, visible, fb)
			}
		}
	}
	insts, err := d.node.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("demo: list instances: %w", err)
	}
	d.p.printf("\n")
	tw := d.p.table()
	d.p.row(tw, "INSTANCE", "SCOPE", "ISOLATION", "WORKERS", "MAX RUNS", "QUEUE CAP", "STATUS")
	for _, in := range insts {
		scope := in.TenantId
		if scope == "" {
			scope = "(shared)"
		}
		d.p.row(tw, in.RuntimeInstanceId, scope, in.IsolationMode, fmt.Sprint(in.WorkerCount), fmt.Sprint(in.MaxConcurrentRuns),
			fmt.Sprint(in.QueueCapacity), in.Status)
	}
	d.p.flush(tw)
	d.p.printf("\ntenant-a is dedicated without shared fallback: it only ever sees tenant-a-runtime-* instances.\n")
	d.p.printf("tenant-b is hybrid: it prefers its own tenant-b-runtime-* instances and may fall back to shared ones.\n")
	d.p.printf("default is shared: it runs on the shared runtime-instance-* pool and never sees the others.\n")
	return nil
}

// summary prints the summary table and returns an error wrapping ErrRunFailed when a run did
// not succeed.
func (d *demo) summary(ctx context.Context) error {
	d.p.section("6. Summary")
	tw := d.p.table()
	d.p.row(tw, "RUN", "TENANT", "PIPELINE", "STATUS", "INSTANCE", "STEPS", "ATTEMPTS", "DURATION")
	var ok, steps, total, attempts int
	var failed []string
	for _, t := range d.runs {
		run, err := d.node.GetRun(ctx, t.id)
		if err != nil {
			return fmt.Errorf("demo: get run %s: %w", t.id, err)
		}
		ss, err := d.node.RunSteps(ctx, run)
		if err != nil {
			return fmt.Errorf("demo: get steps of %s: %w", t.id, err)
		}
		n, a := countSucceeded(ss), 0
		for _, s := range ss {
			a += int(s.Attempts)
		}
		steps, total, attempts = steps+n, total+t.total, attempts+a
		if run.Status == messages.RunSucceeded {
			ok++
		} else {
			failed = append(failed, short(t.id, 12))
		}
		dur := time.Duration(run.UpdatedAt - run.CreatedAt).Round(time.Millisecond)
		d.result.Runs = append(d.result.Runs, ResultRun{SharedRunID: t.id, TenantID: t.tenant, Pipeline: t.pipeline,
			Status: run.Status, RuntimeInstanceID: run.AssignedRuntimeInstanceId, StepsSucceeded: n, Steps: t.total,
			Attempts: a, DurationMS: dur.Milliseconds()})
		d.p.row(tw, short(t.id, 12), t.tenant, t.pipeline, run.Status, run.AssignedRuntimeInstanceId,
			fmt.Sprintf("%d/%d", n, t.total), fmt.Sprint(a), dur.String())
	}
	d.p.row(tw, "TOTAL", fmt.Sprintf("%d runs", len(d.runs)), "", fmt.Sprintf("%d succeeded", ok), "",
		fmt.Sprintf("%d/%d", steps, total), fmt.Sprint(attempts), time.Since(d.start).Round(time.Millisecond).String()+" wall")
	d.p.flush(tw)
	if len(failed) > 0 {
		d.p.printf("\nFAILED: %d run(s) did not succeed: %s\n", len(failed), strings.Join(failed, ", "))
		return fmt.Errorf("%w: %s", ErrRunFailed, strings.Join(failed, ", "))
	}
	d.p.printf("\nall %d runs succeeded\n", len(d.runs))
	return nil
}

// countSucceeded counts succeeded step states.
func countSucceeded(ss []*messages.StepState) int {
	n := 0
	for _, s := range ss {
		if s.Status == messages.StepSucceeded {
			n++
		}
	}
	return n
}

// short returns the distinctive tail of an id ("run-" + the random part's first hex digits),
// at most n characters.
func short(id string, n int) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 && strings.Count(id, "-") >= 2 {
		prefix := id[:strings.IndexByte(id, '-')+1]
		id = prefix + id[i+1:]
	}
	if len(id) > n {
		return id[:n]
	}
	return id
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// oneLine folds s into one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}
