package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dairuntime/dair/messages"
)

// tracked is one run the demo submitted, as its ledger has shown it so far.
type tracked struct {
	id, tenant, pipeline string
	total                int

	seq       int64    // last ledger seq read
	status    string   // last run status seen in the ledger
	succeeded int      // steps succeeded
	execIDs   []string // executions the run started or resumed, in order
	recovered bool     // a recovery entry was seen
}

// terminal reports whether the run reached a final status.
func (t *tracked) terminal() bool { return messages.IsTerminalRun(t.status) }

// allTerminal is the follow condition "every run is final".
func allTerminal(runs []*tracked) func() bool {
	return func() bool {
		for _, t := range runs {
			if !t.terminal() {
				return false
			}
		}
		return true
	}
}

// follow polls the ledgers of runs, prints one line per transition and returns once done
// reports true (checked after each poll), ctx ends or phaseTimeout passes.
func (d *demo) follow(ctx context.Context, runs []*tracked, done func() bool) error {
	deadline := time.Now().Add(phaseTimeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		for _, t := range runs {
			entries, err := d.st.ReadLedger(ctx, t.id, t.seq, 0)
			if err != nil {
				return fmt.Errorf("demo: read ledger of %s: %w", t.id, err)
			}
			for _, e := range entries {
				t.seq = e.Seq
				d.observe(t, e)
			}
		}
		if done() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: runs not done after %s", ErrStalled, phaseTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: follow runs: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// observe updates t from one ledger entry and prints it when it is a transition worth a line.
func (d *demo) observe(t *tracked, e *messages.LedgerEntry) {
	switch e.Kind {
	case messages.KindStepSucceeded:
		t.succeeded++
	case messages.KindRunSucceeded:
		t.status = messages.RunSucceeded
	case messages.KindRunFailed:
		t.status = messages.RunFailed
	case messages.KindRunCancelled:
		t.status = messages.RunCancelled
	case messages.KindExecutionStarted:
		t.execIDs = append(t.execIDs, e.ExecutionId)
	case messages.KindRecovery:
		t.recovered = true
		if e.Reason == "resumed-from-committed-steps" {
			t.execIDs = append(t.execIDs, e.ExecutionId)
		}
	}
	text := describe(t, e)
	if text == "" {
		return
	}
	d.p.printf("  %7s  %-9s %-16s %-12s %s\n", fmt.Sprintf("+%.2fs", time.Since(d.start).Seconds()),
		t.tenant, t.pipeline, short(t.id, 12), text)
}

// describe renders a ledger entry as one progress line; "" hides the entry.
func describe(t *tracked, e *messages.LedgerEntry) string {
	data := map[string]any{}
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &data); err != nil {
			data = map[string]any{}
		}
	}
	switch e.Kind {
	case messages.KindAdmission:
		if e.RuntimeInstanceId != "" {
			return fmt.Sprintf("admission: %v -> %s (%s)", data["decision"], e.RuntimeInstanceId, e.Reason)
		}
		return fmt.Sprintf("admission: %v (%s)", data["decision"], e.Reason)
	case messages.KindScaleOutRequested:
		return fmt.Sprintf("scale-out requested: %v capacity, prefix %v (%s)", data["isolation_mode"], data["prefix"], e.Reason)
	case messages.KindScaleOutFulfilled:
		return fmt.Sprintf("scale-out fulfilled (%s)", e.Reason)
	case messages.KindScaleOutFailed:
		return fmt.Sprintf("scale-out failed (%s)", e.Reason)
	case messages.KindDispatch:
		return fmt.Sprintf("dispatched to %s", e.RuntimeInstanceId)
	case messages.KindDispatchFailed:
		return fmt.Sprintf("dispatch to %s failed (%s)", e.RuntimeInstanceId, e.Reason)
	case messages.KindExecutionStarted:
		return fmt.Sprintf("execution %s started on %s", e.ExecutionId, e.RuntimeInstanceId)
	case messages.KindRecovery:
		if e.Reason == "resumed-from-committed-steps" {
			return fmt.Sprintf("recovery: execution %s resumed on %s at step %d/%d (epoch %d)",
				e.ExecutionId, e.RuntimeInstanceId, t.succeeded+1, t.total, e.Epoch)
		}
		return fmt.Sprintf("recovery: %s %s lost; execution %s fenced (epoch %d) and requeued",
			e.Reason, e.RuntimeInstanceId, e.ExecutionId, e.Epoch)
	case messages.KindStepSucceeded:
		return fmt.Sprintf("step %-10s succeeded  [%d/%d] attempt %d", e.StepId, t.succeeded, t.total, e.Attempt)
	case messages.KindStepFailed:
		if final, ok := data["final"].(bool); ok && !final {
			return fmt.Sprintf("step %-10s attempt %d failed, retry in %vms: %s", e.StepId, e.Attempt, data["retry_in_ms"], oneLine(e.Reason, 60))
		}
		return fmt.Sprintf("step %-10s failed: %s", e.StepId, oneLine(e.Reason, 80))
	case messages.KindStepRetry:
		return fmt.Sprintf("step %-10s retry (%s)", e.StepId, e.Reason)
	case messages.KindRunSucceeded, messages.KindRunFailed, messages.KindRunCancelled, messages.KindRunPaused,
		messages.KindRunResumed, messages.KindFenced:
		if e.Reason != "" && e.Kind != messages.KindRunSucceeded {
			return fmt.Sprintf("%s (%s)", e.Kind, e.Reason)
		}
		return e.Kind
	}
	return "" // submitted, reservation, step_started: implied by the lines around them
}
