package progress

import (
	"fmt"
	"strings"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Phases of a run before and between its steps, as the status line names them.
const (
	phaseQueued      = "queued"
	phaseScalingOut  = "scaling out"
	phaseDispatched  = "dispatched"
	phasePaused      = "paused"
	phaseRecovering  = "recovering"
	firstStillAfter  = 5 * time.Second
	stillGrowth      = 3
	maxRunningInLine = 3
)

// phase is what the run waits for while no step runs: since when and why.
type phase struct {
	name   string
	since  time.Time
	reason string
	// nextStill is when a non-live printer next reports the phase still lasting.
	nextStill time.Time
}

// trackPhase updates the run's phase from one ledger entry and reports whether the phase
// changed (a new name or reason).
func (p *Printer) trackPhase(e httpapi.LedgerEntry) bool {
	set := func(name, reason string) bool {
		if p.phase.name == name && (reason == "" || p.phase.reason == reason) {
			return false
		}
		since := e.At
		if p.phase.name == name {
			since = p.phase.since // a new reason for the same wait keeps its start
		}
		p.phase = phase{name: name, since: since, reason: reason, nextStill: since.Add(firstStillAfter)}
		return true
	}
	switch e.Kind {
	case messages.KindSubmitted:
		return set(phaseQueued, "")
	case messages.KindAdmission:
		if e.RuntimeInstanceID == "" {
			return set(phaseQueued, e.Reason)
		}
	case messages.KindReservation, messages.KindDispatchFailed:
		if e.Reason != "" && e.Reason != "reserved" {
			return set(phaseQueued, e.Reason)
		}
	case messages.KindScaleOutRequested:
		return set(phaseScalingOut, e.Reason)
	case messages.KindScaleOutFulfilled:
		return set(phaseQueued, "scale-out fulfilled, waiting for dispatch")
	case messages.KindScaleOutFailed:
		return set(phaseQueued, nonEmpty(e.Reason, "scale-out failed"))
	case messages.KindDispatch:
		return set(phaseDispatched, "")
	case messages.KindRunPaused:
		return set(phasePaused, e.Reason)
	case messages.KindRecovery:
		p.phase = phase{name: phaseRecovering, since: e.At, reason: e.Reason, nextStill: e.At.Add(firstStillAfter)}
	case messages.KindExecutionStarted, messages.KindStepStarted, messages.KindRunResumed:
		p.phase = phase{}
	}
	return false
}

// Tick refreshes the display at now: on a terminal it redraws the status line with elapsed
// times; otherwise it prints a "still ..." line when the run has waited, or a step has run,
// 5s, 15s, 45s, ... It returns write errors only. Like Event, it is not goroutine-safe (see
// Ticking).
func (p *Printer) Tick(now time.Time) error {
	p.now = now
	if p.live {
		return p.redraw()
	}
	if len(p.running) == 0 && p.phase.name != "" && !p.phase.nextStill.IsZero() && !now.Before(p.phase.nextStill) {
		p.phase.nextStill = now.Add(now.Sub(p.phase.since) * (stillGrowth - 1))
		return p.line(fmt.Sprintf("... still %s after %s%s", p.phase.name, roundSeconds(now.Sub(p.phase.since)), because(p.phase.reason)))
	}
	for _, id := range p.running {
		start, next := p.started[id], p.nextStill[id]
		if start.IsZero() || now.Before(next) {
			continue
		}
		p.nextStill[id] = now.Add(now.Sub(start) * (stillGrowth - 1))
		if err := p.line(fmt.Sprintf("... step %s still running after %s", id, roundSeconds(now.Sub(start)))); err != nil {
			return err
		}
	}
	return nil
}

// statusText is the transient status line: the running steps with their elapsed times, or
// the phase the run waits in.
func (p *Printer) statusText() string {
	if len(p.running) > 0 {
		parts := make([]string, 0, min(len(p.running), maxRunningInLine))
		for _, id := range p.running[:min(len(p.running), maxRunningInLine)] {
			part := id
			if start := p.started[id]; !start.IsZero() && !p.now.IsZero() && p.now.After(start) {
				part += " " + roundSeconds(p.now.Sub(start))
			}
			parts = append(parts, part)
		}
		s := fmt.Sprintf("running %d: %s", len(p.running), strings.Join(parts, ", "))
		if len(p.running) > maxRunningInLine {
			s += ", ..."
		}
		return s
	}
	if p.phase.name == "" {
		return ""
	}
	s := p.phase.name
	if !p.phase.since.IsZero() && !p.now.IsZero() && p.now.After(p.phase.since) {
		s += " " + roundSeconds(p.now.Sub(p.phase.since))
	}
	return s + because(p.phase.reason)
}

// phaseLine is the permanent line a non-live printer writes when the phase changes.
func (p *Printer) phaseLine() string {
	return p.phase.name + because(p.phase.reason)
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// roundSeconds formats an elapsed time to a tenth of a second ("9.5s").
func roundSeconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
