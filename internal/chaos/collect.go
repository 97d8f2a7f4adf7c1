package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// settleStable is how many unchanged usage reads in a row count as settled.
const settleStable = 3

// collect reads the evidence of every acknowledged run from the store (run record, ledger,
// step records, usage), the counting server's calls and the live reservations. Usage is
// written by the fenced commits themselves, so it matches the ledgers at the first read unless
// exactly-once metering is broken; reservations are released asynchronously. It waits (up to
// Config.SettleTimeout) for usage to match the ledgers or stop changing, and for the holds to
// drain.
func (h *harness) collect(ctx context.Context, faults []FaultRecord) (Evidence, map[string][]httpapi.LedgerEntry, error) {
	ev := Evidence{Calls: h.counter.snapshot(), Frozen: frozenWindows(faults), Senders: h.pidNames()}
	ledgers := map[string][]httpapi.LedgerEntry{}
	for _, tr := range h.track.snapshot() {
		re, err := h.runEvidence(ctx, tr)
		if err != nil {
			return ev, nil, err
		}
		ledgers[re.ID] = re.Ledger
		ev.Runs = append(ev.Runs, re)
	}
	if err := h.settleUsage(ctx, ev.Runs); err != nil {
		return ev, nil, err
	}
	holds, err := h.settleReservations(ctx, ev.Runs)
	if err != nil {
		return ev, nil, err
	}
	ev.Reservations = holds
	return ev, ledgers, nil
}

// runEvidence reads one run's record, ledger and step records.
func (h *harness) runEvidence(ctx context.Context, tr tracked) (RunEvidence, error) {
	re := RunEvidence{ID: tr.id, Tenant: tr.tenant, Observed: tr.observed}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	run, err := h.store.GetRun(cctx, tr.id)
	if err != nil {
		return re, fmt.Errorf("read run %s: %w", tr.id, err)
	}
	re.Status, re.Reason, re.ExecutionID = run.Status, run.FailureReason, run.ExecutionId
	entries, err := h.store.ReadLedger(cctx, tr.id, 0, 0)
	if err != nil {
		return re, fmt.Errorf("read ledger of %s: %w", tr.id, err)
	}
	for _, e := range entries {
		re.Ledger = append(re.Ledger, ledgerEntry(e))
	}
	if run.ExecutionId == "" {
		return re, nil
	}
	_, steps, err := h.store.GetExecution(cctx, run.ExecutionId)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return re, fmt.Errorf("read execution %s: %w", run.ExecutionId, err)
	}
	for _, s := range steps {
		rec := StepRecord{StepID: s.StepId, Status: s.Status, Epoch: s.Epoch}
		if s.FinishedAt != 0 {
			rec.FinishedAt = time.Unix(0, s.FinishedAt).UTC()
		}
		re.Steps = append(re.Steps, rec)
	}
	return re, nil
}

// ledgerEntry converts a stored entry to its API view.
func ledgerEntry(e *messages.LedgerEntry) httpapi.LedgerEntry {
	return httpapi.LedgerEntry{Seq: e.Seq, At: time.Unix(0, e.At).UTC(), Kind: e.Kind, SharedRunID: e.SharedRunId,
		TenantID: e.TenantId, ExecutionID: e.ExecutionId, RuntimeInstanceID: e.RuntimeInstanceId, StepID: e.StepId,
		Attempt: e.Attempt, Epoch: e.Epoch, Reason: e.Reason}
}

// settleUsage fills each run's UsageSteps from the tenants' usage, re-reading every second
// until it matches the ledgers, stops changing, or Config.SettleTimeout passes.
func (h *harness) settleUsage(ctx context.Context, runs []RunEvidence) error {
	deadline := time.Now().Add(h.cfg.SettleTimeout)
	var last map[string]map[string]int
	stable := 0
	for {
		byRun, err := h.usageByRun(ctx)
		if err != nil {
			return err
		}
		for i := range runs {
			runs[i].UsageSteps = byRun[runs[i].ID]
		}
		if CheckUsage(runs).Held || time.Now().After(deadline) {
			return nil
		}
		if maps.EqualFunc(byRun, last, maps.Equal) {
			if stable++; stable >= settleStable {
				return nil
			}
		} else {
			stable = 0
		}
		last = byRun
		if !sleepUntil(ctx, time.Now().Add(pollEvery)) {
			return ctx.Err()
		}
	}
}

// usageByRun counts the workload tenants' step usage events by run and step.
func (h *harness) usageByRun(ctx context.Context) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	for _, tenant := range h.work.tenantIDs() {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		events, err := h.store.ListUsage(cctx, store.UsageFilter{TenantID: tenant})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read usage of %s: %w", tenant, err)
		}
		for _, e := range events {
			if e.Kind != "step" {
				continue
			}
			if out[e.SharedRunId] == nil {
				out[e.SharedRunId] = map[string]int{}
			}
			out[e.SharedRunId][e.StepId]++
		}
	}
	return out, nil
}

// settleReservations counts the live holds of every instance the runs touched or the
// registry lists on the harness's nodes, re-reading every second until none is left or Config.SettleTimeout passes.
func (h *harness) settleReservations(ctx context.Context, runs []RunEvidence) (map[string]int, error) {
	ids := map[string]bool{}
	for _, id := range h.track.instanceIDs() {
		ids[id] = true
	}
	for _, r := range runs {
		for _, e := range r.Ledger {
			if e.RuntimeInstanceID != "" {
				ids[e.RuntimeInstanceID] = true
			}
		}
	}
	began := time.Now()
	deadline := began.Add(h.cfg.SettleTimeout)
	for {
		holds, total, err := h.holds(ctx, ids)
		if err != nil {
			return nil, err
		}
		if total == 0 || time.Now().After(deadline) {
			if total == 0 && time.Since(began) > pollEvery {
				h.out.printf("chaos: reservations drained %s after the runs finished", time.Since(began).Round(100*time.Millisecond))
			}
			return holds, nil
		}
		if !sleepUntil(ctx, time.Now().Add(pollEvery)) {
			return nil, ctx.Err()
		}
	}
}

// holds reads the live holds of the instances in ids and of every registered instance of the
// harness's nodes.
func (h *harness) holds(ctx context.Context, ids map[string]bool) (map[string]int, int, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	list, err := h.store.ListInstances(cctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list instances: %w", err)
	}
	ours := map[string]bool{}
	for _, n := range h.cluster.Nodes() {
		ours[n.ID()] = true
	}
	for _, d := range list {
		if ours[d.HostId] {
			ids[d.RuntimeInstanceId] = true
		}
	}
	holds, total := map[string]int{}, 0
	for _, id := range sortedKeys(ids) {
		n, err := h.store.ReservationCount(cctx, id)
		if err != nil {
			return nil, 0, fmt.Errorf("count holds of %s: %w", id, err)
		}
		holds[id] = n
		total += n
	}
	return holds, total, nil
}

// frozenWindows returns the SIGSTOP windows of the pause faults (a pause whose SIGCONT failed
// is frozen until now).
func frozenWindows(faults []FaultRecord) []Frozen {
	var out []Frozen
	for _, f := range faults {
		if f.Event.Fault != FaultPause || f.PID == 0 || !f.Injected {
			continue
		}
		to := f.Restored
		if to.IsZero() {
			to = time.Now()
		}
		out = append(out, Frozen{PID: f.PID, Node: f.Target, From: f.Onset, To: to})
	}
	return out
}
