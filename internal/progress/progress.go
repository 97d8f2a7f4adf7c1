package progress

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Printer renders a run's event stream as human progress lines, one per finished step:
//
//	[3/20] step fetch-3 succeeded 102ms
//
// While no step runs it says what the run waits for and why (the admission reason):
// "queued: max-runtime-instances-reached", "scaling out: ...". On a terminal (live) it keeps a
// transient status line instead, redrawn in place, naming the running steps or the wait with
// elapsed times ("queued 9.5s: max-runtime-instances-reached"); Tick moves those times.
// Otherwise Tick prints "... still queued after 5s" lines at 5s, 15s, 45s, ... It is not
// goroutine-safe: feed it from one goroutine, or through Ticking.
type Printer struct {
	out   io.Writer
	live  bool
	total int

	done      int
	started   map[string]time.Time // step id -> start of its current attempt
	nextStill map[string]time.Time // step id -> when a non-live printer next says it still runs
	running   []string
	statusOn  bool // a transient status line is on screen (live only)

	phase phase     // what the run waits for while no step runs
	now   time.Time // the last Tick's time (zero before the first)
}

// New returns a renderer writing to out. total is the pipeline's step count (0 when
// unknown); live draws the transient status line (use it only when out is a terminal).
func New(out io.Writer, total int, live bool) *Printer {
	return &Printer{out: out, live: live, total: total, started: map[string]time.Time{}, nextStill: map[string]time.Time{}}
}

// Event handles one event of the run's stream (it is a client.EventFunc); data is an
// httpapi.LedgerEntry. It returns write errors only; undecodable data is skipped.
func (p *Printer) Event(_ int64, kind string, data []byte) error {
	var e httpapi.LedgerEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil
	}
	if e.Kind == "" {
		e.Kind = kind
	}
	if p.trackPhase(e) {
		if p.live {
			return p.redraw()
		}
		if p.phase.reason == "" {
			return nil // a wait without a reason is reported only if it lasts (Tick)
		}
		return p.line(p.phaseLine())
	}
	switch e.Kind {
	case messages.KindStepStarted:
		p.started[e.StepID] = e.At
		p.nextStill[e.StepID] = e.At.Add(firstStillAfter)
		p.addRunning(e.StepID)
		return p.redraw()
	case messages.KindStepSucceeded:
		p.done++
		return p.finished(e, "succeeded", "")
	case messages.KindStepFailed:
		var d struct {
			Final     *bool `json:"final"`
			RetryInMS int64 `json:"retry_in_ms"`
		}
		if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d.Final != nil && !*d.Final {
			return p.finished(e, "failed", fmt.Sprintf("(attempt %d, retrying in %s): %s", e.Attempt,
				time.Duration(d.RetryInMS)*time.Millisecond, e.Reason))
		}
		p.done++
		return p.finished(e, "failed", e.Reason)
	case messages.KindRecovery:
		return p.line(fmt.Sprintf("recovery: %s", nonEmpty(e.Reason, "execution moved to a new instance")))
	}
	return nil
}

// Summary writes the final line for run and clears the status line.
func (p *Printer) Summary(run *httpapi.Run) error {
	if err := p.clear(); err != nil {
		return err
	}
	ok := 0
	for _, s := range run.Steps {
		if s.Status == messages.StepSucceeded {
			ok++
		}
	}
	total := max(len(run.Steps), p.total)
	took := run.UpdatedAt.Sub(run.CreatedAt).Round(time.Millisecond)
	msg := fmt.Sprintf("run %s %s: %d/%d steps succeeded in %s", run.SharedRunID, run.Status, ok, total, took)
	if run.FailureReason != "" {
		msg += ": " + run.FailureReason
	}
	_, err := fmt.Fprintln(p.out, msg)
	return err
}

func (p *Printer) finished(e httpapi.LedgerEntry, verb, detail string) error {
	p.removeRunning(e.StepID)
	counter := fmt.Sprintf("[%d]", p.done)
	if p.total > 0 {
		counter = fmt.Sprintf("[%d/%d]", p.done, p.total)
	}
	msg := fmt.Sprintf("%s step %s %s", counter, e.StepID, verb)
	if start, ok := p.started[e.StepID]; ok && !start.IsZero() && !e.At.IsZero() {
		msg += " " + FormatDuration(e.At.Sub(start))
	}
	if detail != "" {
		msg += " " + detail
	}
	return p.line(msg)
}

// line prints a permanent line, keeping the status line below it.
func (p *Printer) line(s string) error {
	if err := p.clear(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(p.out, s); err != nil {
		return err
	}
	return p.redraw()
}

func (p *Printer) clear() error {
	if !p.statusOn {
		return nil
	}
	p.statusOn = false
	_, err := io.WriteString(p.out, "\r\033[K")
	return err
}

func (p *Printer) redraw() error {
	if !p.live {
		return nil
	}
	if err := p.clear(); err != nil {
		return err
	}
	text := p.statusText()
	if text == "" {
		return nil
	}
	if len(text) > 100 {
		text = text[:97] + "..."
	}
	p.statusOn = true
	_, err := io.WriteString(p.out, text)
	return err
}

func (p *Printer) addRunning(id string) {
	for _, r := range p.running {
		if r == id {
			return
		}
	}
	p.running = append(p.running, id)
	sort.Strings(p.running)
}

func (p *Printer) removeRunning(id string) {
	for i, r := range p.running {
		if r == id {
			p.running = append(p.running[:i], p.running[i+1:]...)
			return
		}
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// FormatDuration formats a step's duration for people: rounded to milliseconds, or to
// microseconds below one millisecond, so that a fast step does not read "0s"; a zero duration
// (both ends recorded at the same instant) reads "<1ms".
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "<1ms"
	}
	return roundDuration(d).String()
}

// roundDuration rounds to milliseconds, or to microseconds below one millisecond.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
