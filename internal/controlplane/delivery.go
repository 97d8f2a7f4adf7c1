package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/messages"
)

// releaseTimeout bounds releasing a slot after a dispatch that did not happen.
const releaseTimeout = 5 * time.Second

// Failure reasons of a run whose dispatch failed for good (the provider's reason follows).
const (
	// ReasonDispatchNonRetryable: the provider answered a non-retryable failure; the run is
	// not dispatched again.
	ReasonDispatchNonRetryable = "dispatch-non-retryable"
	// ReasonDispatchAttemptsExhausted: retryable failures used up MaxAttempts dispatches.
	ReasonDispatchAttemptsExhausted = "dispatch-attempts-exhausted"
)

// deliver marks a reserved run dispatched to x and hands it to x through the provider router.
// pre are the ledger records of the decision, written with the outcome.
func (d *Dispatcher) deliver(ctx context.Context, run *messages.SharedRun, x *messages.CapacityDescriptor, pumpID string, pre ...*messages.LedgerEntry) (Outcome, error) {
	upd, err := d.st.UpdateRun(ctx, run.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status != messages.RunQueued {
			return errNotQueued
		}
		r.Status = messages.RunDispatched
		r.AssignedRuntimeInstanceId = x.RuntimeInstanceId
		r.PumpRuntimeInstanceId = pumpID
		r.Attempts++
		r.FailureReason = ""
		return nil
	})
	if err != nil {
		d.cfg.Ledger.Record(ctx, pre...)
		d.release(ctx, x.RuntimeInstanceId, run.SharedRunId)
		if errors.Is(err, errNotQueued) {
			return Done, nil
		}
		return Requeue, fmt.Errorf("mark run dispatched: %w", err)
	}
	// The decision's entries are written before the delivery, not with its outcome: the
	// execution's start, which the delivery may write first, follows them in the ledger.
	d.cfg.Ledger.Record(ctx, pre...)
	return d.deliverMarked(ctx, upd, x, pumpID, false)
}

// handOver delivers a run that Assign marked dispatched to x (its queue entry is gone: a
// retryable failure enqueues it again). The outcome is for the pump's accounting only.
func (d *Dispatcher) handOver(ctx context.Context, upd *messages.SharedRun, x *messages.CapacityDescriptor, pumpID string) Outcome {
	out, err := d.deliverMarked(ctx, upd, x, pumpID, true)
	if err != nil {
		d.cfg.Log.Warn("deliver assigned run", zap.String("shared_run_id", upd.SharedRunId), zap.Error(err))
	}
	return out
}

// deliverMarked hands upd, marked dispatched to x, to x through the provider router and
// records the outcome after pre. On a retryable failure the run is queued again (and, with
// enqueue, put back in the shared queue).
func (d *Dispatcher) deliverMarked(ctx context.Context, upd *messages.SharedRun, x *messages.CapacityDescriptor, pumpID string, enqueue bool,
	pre ...*messages.LedgerEntry) (Outcome, error) {
	if d.cfg.Prestarter != nil {
		open := d.cfg.Prestarter.Gate(upd, x.RuntimeInstanceId)
		defer open() // after the outcome entry was handed to the ledger, whatever it says
	}
	res := d.cfg.Router.Dispatch(ctx, x, d.request(ctx, upd, x, pumpID))
	if d.cfg.Circuits.Record(CircuitKey(x), res, d.cfg.Now()) {
		d.cfg.Log.Warn("dispatch circuit opened; the instance gets no new work", zap.String("runtime_instance_id", x.RuntimeInstanceId),
			zap.String("provider", res.GetProvider()), zap.String("reason", res.GetReason()))
	}
	entry := &messages.LedgerEntry{SharedRunId: upd.SharedRunId, ExecutionId: upd.ExecutionId, RuntimeInstanceId: x.RuntimeInstanceId,
		TenantId: upd.GetSnapshot().GetTenantId(), Reason: res.GetReason(),
		Data: jsonOrNil(dispatchData{LocalRunID: res.GetLocalRunId(), Provider: res.GetProvider(), PumpRuntimeInstanceID: pumpID,
			Retryable: res.GetRetryable()})}
	// The execution records the local run id when it starts (it marks the run running).
	if res.GetOk() {
		entry.Kind = messages.KindDispatch
		d.recordOutcome(ctx, append(pre, entry)...)
		return Done, nil
	}
	entry.Kind = messages.KindDispatchFailed
	d.cfg.Ledger.Record(ctx, append(pre, entry)...)
	d.release(ctx, x.RuntimeInstanceId, upd.SharedRunId)
	switch {
	case !res.GetRetryable():
		// The command itself was refused (or cannot be delivered by any instance): another try
		// cannot succeed, so the run fails now with the provider's reason.
		return Done, d.reject(ctx, upd, ReasonDispatchNonRetryable+": "+res.GetReason())
	case int(upd.Attempts) >= d.cfg.MaxAttempts:
		return Done, d.reject(ctx, upd, ReasonDispatchAttemptsExhausted+": "+res.GetReason())
	}
	if _, err := d.st.UpdateRun(ctx, upd.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status == messages.RunDispatched || startedWith(r, upd) {
			r.Status = messages.RunQueued
			r.FailureReason = res.GetReason()
		}
		return nil
	}); err != nil {
		return Requeue, fmt.Errorf("requeue run after dispatch failure: %w", err)
	}
	if enqueue {
		if err := d.st.Enqueue(ctx, upd.SharedRunId); err != nil {
			return Requeue, fmt.Errorf("enqueue run after dispatch failure: %w", err)
		}
	}
	return Requeue, nil
}

// startedWith reports whether r is still as an assignment that started its execution wrote it
// (upd, running: see Prestarter) and nothing else took it since: the delivery that failed was
// its only chance to run, so it goes back to the queue like a dispatched run, its execution
// id kept (the next activation takes the execution over at a new epoch).
func startedWith(r, upd *messages.SharedRun) bool {
	return upd.Status == messages.RunRunning && r.Status == messages.RunRunning && r.ExecutionId == upd.ExecutionId &&
		r.LocalRunId == upd.LocalRunId && r.AssignedRuntimeInstanceId == upd.AssignedRuntimeInstanceId
}

// request is the DispatchRequest of a run marked dispatched to x.
func (d *Dispatcher) request(ctx context.Context, run *messages.SharedRun, x *messages.CapacityDescriptor, pumpID string) *messages.DispatchRequest {
	width := 0
	if d.cfg.Pipelines != nil {
		if w, err := d.cfg.Pipelines.Width(ctx, run.Pipeline, run.PipelineHash); err == nil {
			width = w
		}
	}
	return &messages.DispatchRequest{MaxParallelism: int32(width), RuntimeInstanceId: x.RuntimeInstanceId, SharedRunId: run.SharedRunId,
		PipelineKey: run.Pipeline, PipelineHash: run.PipelineHash, Input: run.Input, Snapshot: run.Snapshot, ExecutionId: run.ExecutionId,
		CorrelationId: run.CorrelationId, RequestedBy: run.GetSnapshot().GetRequestedBy(), Source: "shared-queue", PumpRuntimeInstanceId: pumpID}
}

// release drops run's hold on instance, also when ctx already ended (the dispatch's ctx may be
// the reason it failed).
func (d *Dispatcher) release(ctx context.Context, instanceID, runID string) {
	ctx, cancel := detached(ctx, releaseTimeout)
	defer cancel()
	if err := d.st.ReleaseReservation(ctx, instanceID, runID); err != nil {
		d.cfg.Log.Warn("release reservation", zap.String("runtime_instance_id", instanceID), zap.Error(err))
	}
}

// reject fails a run that admission refused.
func (d *Dispatcher) reject(ctx context.Context, run *messages.SharedRun, reason string) error {
	entry := &messages.LedgerEntry{Kind: messages.KindRunFailed, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		TenantId: run.GetSnapshot().GetTenantId(), Reason: reason}
	_, changed, err := d.cfg.Ledger.FinishRun(ctx, run.SharedRunId, entry, func(r *messages.SharedRun) bool {
		if messages.IsTerminalRun(r.Status) {
			return false
		}
		r.Status, r.FailureReason = messages.RunFailed, reason
		return true
	})
	if err != nil {
		return fmt.Errorf("reject run %s: %w", run.SharedRunId, err)
	}
	if changed {
		d.cfg.Metrics.RunFinished(messages.RunFailed)
	}
	return nil
}

// wait records why run stays queued: its ledger entries and the reason on the run, only when
// the reason changed since the last cycle.
func (d *Dispatcher) wait(ctx context.Context, run *messages.SharedRun, reason string, entries ...*messages.LedgerEntry) {
	if run.FailureReason == reason {
		return
	}
	d.cfg.Ledger.Record(ctx, entries...)
	if _, err := d.st.UpdateRun(ctx, run.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status == messages.RunQueued {
			r.FailureReason = reason
		}
		return nil
	}); err != nil {
		d.cfg.Log.Warn("note queue wait", zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
	}
}

// dispatchData is the data of a dispatch outcome entry, its fields in the order of their names
// (as the map it replaces encoded them).
type dispatchData struct {
	LocalRunID            string `json:"local_run_id"`
	Provider              string `json:"provider"`
	PumpRuntimeInstanceID string `json:"pump_runtime_instance_id"`
	Retryable             bool   `json:"retryable"`
}
