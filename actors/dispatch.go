package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/admission"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// outcome tells the pump what to do with a claimed queue item after one dispatch attempt.
type outcome int

const (
	outcomeDone    outcome = iota // dispatched, parked for scale-out, rejected or already final: ack
	outcomeRequeue                // stays queued (no capacity yet, dispatch failed): release
)

// maxDispatchAttempts bounds how often a run may fail provider dispatch before it fails.
const maxDispatchAttempts = 20

// core is the control plane's dispatch logic, shared by the pump, manual drain and direct
// submit. It is goroutine-safe: all state is in the store.
type core struct {
	env       *env
	providers *providers.Registry
	tenants   *ttlCache[*messages.TenantSettings]
	circuits  *circuits
	// scaleOutCreated is called after a scale-out request is stored (wakes the scale-out
	// supervisor); wakePump after a run is enqueued.
	scaleOutCreated func(id string)
	wakePump        func()
}

// tenantSettings returns the normalized settings of a tenant; an unknown tenant is Shared with
// the runtime-instance prefix.
//
// Settings are cached for a second (PutTenant on this node invalidates at once), so a change
// reaches every control plane's admissions within a second, without a restart. The caller owns
// the returned message.
func (c *core) tenantSettings(ctx context.Context, tenantID string) (*messages.TenantSettings, error) {
	if t, ok := c.tenants.get(tenantID); ok {
		return proto.Clone(t).(*messages.TenantSettings), nil
	}
	t, err := c.env.st.GetTenant(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) {
		t, err = tenancy.Defaults(tenantID), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load tenant %s: %w", tenantID, err)
	}
	t = tenancy.Normalize(t)
	c.tenants.put(tenantID, t)
	return proto.Clone(t).(*messages.TenantSettings), nil
}

// dispatchRun runs admission for one queued run and carries out the decision. insts is the
// registry snapshot to decide on (a pump cycle reads it once for its whole batch); nil reads it.
func (c *core) dispatchRun(ctx context.Context, runID, pumpID string, insts []*messages.CapacityDescriptor) (outcome, error) {
	e := c.env
	run, err := e.st.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return outcomeDone, nil
	}
	if err != nil {
		return outcomeRequeue, fmt.Errorf("load run %s: %w", runID, err)
	}
	if run.Status != messages.RunQueued {
		return outcomeDone, nil // already dispatched, parked or final: a stale queue entry
	}
	snap := run.Snapshot
	if snap == nil || snap.TenantId == "" {
		return outcomeDone, c.reject(ctx, run, "missing-execution-context")
	}
	t, err := c.tenantSettings(ctx, snap.TenantId)
	if err != nil {
		return outcomeRequeue, err
	}
	if insts == nil {
		if insts, err = e.st.ListInstances(ctx); err != nil {
			return outcomeRequeue, fmt.Errorf("list instances: %w", err)
		}
	}
	insts = c.circuits.overlay(insts, e.now())
	if e.cfg.Cluster != nil {
		insts = memberOverlay(insts, e.cfg.Cluster.Members())
	}
	visible := tenancy.FilterVisible(insts, snap.TenantId, snap.TenantGroupId, t)
	reserved := make(map[string]int, len(visible))
	for _, d := range visible {
		n, err := e.st.ReservationCount(ctx, d.RuntimeInstanceId)
		if err != nil {
			return outcomeRequeue, fmt.Errorf("count reservations: %w", err)
		}
		reserved[d.RuntimeInstanceId] = n
	}
	pending, pendingKnown := 0, false
	// Reservations refused on full instances, recorded with whatever the cycle decides last. A
	// run that keeps waiting is recorded once per wait reason, not on every pump cycle (where
	// "every chosen instance was full" is one reason, whatever admission said after it).
	var full []*messages.LedgerEntry
	for try := 0; try < 3; try++ {
		in := admission.Input{Snapshot: snap, Tenant: t, Instances: insts, Reserved: reserved,
			PendingScaleOuts: pending, Now: e.now(), HeartbeatTimeout: e.cfg.HeartbeatTTL}
		dec := admission.Decide(in)
		if dec.Kind == admission.RequestScaleOut && !pendingKnown {
			// Pending scale-outs matter only when admission wants more capacity: read them then.
			if pending, err = c.pendingScaleOuts(ctx, t); err != nil {
				return outcomeRequeue, err
			}
			pendingKnown = true
			in.PendingScaleOuts = pending
			dec = admission.Decide(in)
		}
		admitted := c.admissionEntry(run, dec)
		c.env.metrics.admission(dec.Kind.String(), dec.Reason)
		switch dec.Kind {
		case admission.AssignToInstance:
			d := find(insts, dec.InstanceID)
			ok, err := e.st.Reserve(ctx, d.RuntimeInstanceId, run.SharedRunId, int(d.MaxConcurrentRuns), e.cfg.ReservationTTL)
			if err != nil {
				return outcomeRequeue, fmt.Errorf("reserve %s: %w", d.RuntimeInstanceId, err)
			}
			reservation := &messages.LedgerEntry{Kind: messages.KindReservation, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
				RuntimeInstanceId: d.RuntimeInstanceId, TenantId: snap.TenantId, Reason: map[bool]string{true: "reserved", false: reasonNoFreeSlot}[ok]}
			if !ok {
				// Another dispatch took the last slot since the count was read: the instance is
				// full (not gone), so the next decision sees it as capacity without a free slot.
				full = append(full, admitted, reservation)
				reserved[d.RuntimeInstanceId] = int(d.MaxConcurrentRuns)
				continue
			}
			return c.deliver(ctx, run, d, pumpID, append(full, admitted, reservation)...)
		case admission.QueueGlobally:
			reason := dec.Reason
			if len(full) > 0 {
				reason = reasonNoFreeSlot
			}
			c.wait(ctx, run, reason, append(full, admitted)...)
			return outcomeRequeue, nil
		case admission.RequestScaleOut:
			e.ledger(ctx, append(full, admitted)...)
			return outcomeDone, c.requestScaleOut(ctx, run, t, dec.Reason)
		default:
			e.ledger(ctx, append(full, admitted)...)
			return outcomeDone, c.reject(ctx, run, dec.Reason)
		}
	}
	c.wait(ctx, run, reasonNoFreeSlot, full...)
	return outcomeRequeue, nil
}

// reasonNoFreeSlot is the wait reason of a run whose chosen instances were all full.
const reasonNoFreeSlot = "no-free-slot"

// wait records why run stays queued: its ledger entries and the reason on the run, only when
// the reason changed since the last cycle.
func (c *core) wait(ctx context.Context, run *messages.SharedRun, reason string, entries ...*messages.LedgerEntry) {
	if run.FailureReason == reason {
		return
	}
	c.env.ledger(ctx, entries...)
	c.noteWait(ctx, run.SharedRunId, reason)
}

func find(insts []*messages.CapacityDescriptor, id string) *messages.CapacityDescriptor {
	for _, d := range insts {
		if d.RuntimeInstanceId == id {
			return d
		}
	}
	return nil
}

// admissionEntry is the ledger record of a decision (listing only candidates the tenant may
// see: other tenants' instance ids never reach a tenant's ledger).
func (c *core) admissionEntry(run *messages.SharedRun, dec admission.Decision) *messages.LedgerEntry {
	var seen []map[string]any
	for _, cd := range dec.Considered {
		if cd.Visible {
			seen = append(seen, map[string]any{"runtime_instance_id": cd.InstanceID, "eligible": cd.Eligible, "reason": cd.Reason})
		}
	}
	return &messages.LedgerEntry{Kind: messages.KindAdmission, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		RuntimeInstanceId: dec.InstanceID, TenantId: run.GetSnapshot().GetTenantId(), Reason: dec.Reason,
		Data: mustJSON(map[string]any{"decision": dec.Kind.String(), "fallback": dec.Fallback, "candidates": seen})}
}

// noteWait records on the run why it is waiting in the queue.
func (c *core) noteWait(ctx context.Context, runID, reason string) {
	if _, err := c.env.st.UpdateRun(ctx, runID, func(r *messages.SharedRun) error {
		if r.Status == messages.RunQueued {
			r.FailureReason = reason
		}
		return nil
	}); err != nil {
		c.env.log.Warn("note queue wait", zap.String("shared_run_id", runID), zap.Error(err))
	}
}

// deliver hands a reserved run to its instance through the provider router.
func (c *core) deliver(ctx context.Context, run *messages.SharedRun, d *messages.CapacityDescriptor, pumpID string, pre ...*messages.LedgerEntry) (outcome, error) {
	e := c.env
	upd, err := e.st.UpdateRun(ctx, run.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status != messages.RunQueued {
			return errNotQueued
		}
		r.Status = messages.RunDispatched
		r.AssignedRuntimeInstanceId = d.RuntimeInstanceId
		r.PumpRuntimeInstanceId = pumpID
		r.Attempts++
		r.FailureReason = ""
		return nil
	})
	if errors.Is(err, errNotQueued) {
		e.ledger(ctx, pre...)
		c.release(d.RuntimeInstanceId, run.SharedRunId)
		return outcomeDone, nil
	}
	if err != nil {
		e.ledger(ctx, pre...)
		c.release(d.RuntimeInstanceId, run.SharedRunId)
		return outcomeRequeue, fmt.Errorf("mark run dispatched: %w", err)
	}
	width := int32(0)
	if cp, err := e.pipelines.get(ctx, upd.Pipeline, upd.PipelineHash); err == nil {
		width = int32(cp.g.Width())
	}
	req := &messages.DispatchRequest{MaxParallelism: width, RuntimeInstanceId: d.RuntimeInstanceId, SharedRunId: upd.SharedRunId, PipelineKey: upd.Pipeline,
		PipelineHash: upd.PipelineHash, Input: upd.Input, Snapshot: upd.Snapshot, ExecutionId: upd.ExecutionId,
		CorrelationId: upd.CorrelationId, RequestedBy: upd.GetSnapshot().GetRequestedBy(), Source: "shared-queue", PumpRuntimeInstanceId: pumpID}
	res := c.providers.Dispatch(ctx, d, req)
	if c.circuits.record(d.RuntimeInstanceId, res, e.now()) {
		e.log.Warn("dispatch circuit opened", zap.String("runtime_instance_id", d.RuntimeInstanceId), zap.String("reason", res.GetReason()))
	}
	entry := &messages.LedgerEntry{SharedRunId: upd.SharedRunId, ExecutionId: upd.ExecutionId, RuntimeInstanceId: d.RuntimeInstanceId,
		TenantId: upd.GetSnapshot().GetTenantId(), Reason: res.GetReason(),
		Data: mustJSON(map[string]any{"provider": res.GetProvider(), "local_run_id": res.GetLocalRunId(), "pump_runtime_instance_id": pumpID, "retryable": res.GetRetryable()})}
	// The execution records the local run id when it starts (it marks the run running).
	if res.GetOk() {
		entry.Kind = messages.KindDispatch
		e.ledger(ctx, append(pre, entry)...)
		return outcomeDone, nil
	}
	entry.Kind = messages.KindDispatchFailed
	e.ledger(ctx, append(pre, entry)...)
	c.release(d.RuntimeInstanceId, upd.SharedRunId)
	if upd.Attempts >= maxDispatchAttempts {
		return outcomeDone, c.reject(ctx, upd, "dispatch-attempts-exhausted: "+res.GetReason())
	}
	if _, err := e.st.UpdateRun(ctx, upd.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status == messages.RunDispatched {
			r.Status = messages.RunQueued
			r.FailureReason = res.GetReason()
		}
		return nil
	}); err != nil {
		return outcomeRequeue, fmt.Errorf("requeue run after dispatch failure: %w", err)
	}
	return outcomeRequeue, nil
}

var errNotQueued = errors.New("actors: run is no longer queued")

func (c *core) release(instanceID, runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.env.st.ReleaseReservation(ctx, instanceID, runID); err != nil {
		c.env.log.Warn("release reservation", zap.String("runtime_instance_id", instanceID), zap.Error(err))
	}
}

// pendingScaleOuts counts unfinished scale-out requests of t's scope.
func (c *core) pendingScaleOuts(ctx context.Context, t *messages.TenantSettings) (int, error) {
	reqs, err := c.env.st.ListScaleOuts(ctx, messages.ScaleOutPending, messages.ScaleOutProvisioning, messages.ScaleOutFailed)
	if err != nil {
		return 0, fmt.Errorf("list scale-outs: %w", err)
	}
	// A request that failed recently still counts for a cooldown, so a failing provider is not
	// asked again by every pump cycle.
	cooldown := c.env.now().Add(-c.env.cfg.ScaleOutCooldown).UnixNano()
	n := 0
	for _, r := range reqs {
		if r.Status == messages.ScaleOutFailed && r.UpdatedAt < cooldown {
			continue
		}
		if sameScope(r.Settings, t) {
			n++
		}
	}
	return n, nil
}

// sameScope reports whether two settings name the same tenant runtime scope (tenant id +
// tenant group id + prefix); shared tenants share one scope per prefix.
func sameScope(a, b *messages.TenantSettings) bool {
	if a == nil || b == nil {
		return false
	}
	if a.RuntimeInstanceIdPrefix != b.RuntimeInstanceIdPrefix {
		return false
	}
	if a.IsolationMode == messages.IsolationShared && b.IsolationMode == messages.IsolationShared {
		return true
	}
	return a.TenantId == b.TenantId && a.TenantGroupId == b.TenantGroupId
}

func (c *core) requestScaleOut(ctx context.Context, run *messages.SharedRun, t *messages.TenantSettings, reason string) error {
	e := c.env
	now := e.now().UnixNano()
	req := &messages.ScaleOutRequest{RequestId: ids.New("scaleout"), Settings: t, SharedRunId: run.SharedRunId,
		ControlPlaneId: e.cfg.ControlPlaneID, ProviderHint: e.cfg.ScaleOutProvider, Status: messages.ScaleOutPending,
		CreatedAt: now, UpdatedAt: now, CorrelationId: run.CorrelationId}
	if err := e.st.CreateScaleOut(ctx, req); err != nil {
		return fmt.Errorf("create scale-out request: %w", err)
	}
	if _, err := e.st.UpdateRun(ctx, run.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status == messages.RunQueued {
			r.Status = messages.RunScaleOutRequested
			r.ScaleOutRequestId = req.RequestId
		}
		return nil
	}); err != nil {
		return fmt.Errorf("park run for scale-out: %w", err)
	}
	e.ledger(ctx, &messages.LedgerEntry{Kind: messages.KindScaleOutRequested, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		TenantId: run.GetSnapshot().GetTenantId(), Reason: reason,
		Data: mustJSON(map[string]any{"request_id": req.RequestId, "prefix": t.RuntimeInstanceIdPrefix, "isolation_mode": t.IsolationMode,
			"max_runtime_instances": t.MaxRuntimeInstances, "provider_hint": req.ProviderHint})})
	if c.scaleOutCreated != nil {
		c.scaleOutCreated(req.RequestId)
	}
	return nil
}

// reject fails a run that admission refused.
func (c *core) reject(ctx context.Context, run *messages.SharedRun, reason string) error {
	entry := &messages.LedgerEntry{Kind: messages.KindRunFailed, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		TenantId: run.GetSnapshot().GetTenantId(), Reason: reason}
	_, changed, err := c.env.finishRun(ctx, run.SharedRunId, entry, func(r *messages.SharedRun) bool {
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
		c.env.metrics.runFinished(messages.RunFailed)
	}
	return nil
}

// requeueScope makes the runs parked for scale-out in t's scope queued again (the normal pump
// dispatches them). It returns how many it requeued.
func (c *core) requeueScope(ctx context.Context, t *messages.TenantSettings, requestID, kind, reason string) (int, error) {
	e := c.env
	runs, err := e.st.ListRuns(ctx, store.RunFilter{Status: messages.RunScaleOutRequested, Limit: 100000})
	if err != nil {
		return 0, fmt.Errorf("list parked runs: %w", err)
	}
	n := 0
	for _, r := range runs {
		rt, err := c.tenantSettings(ctx, r.GetSnapshot().GetTenantId())
		if err != nil {
			return n, err
		}
		if !sameScope(rt, t) && r.ScaleOutRequestId != requestID {
			continue
		}
		moved := false
		if _, err := e.st.UpdateRun(ctx, r.SharedRunId, func(x *messages.SharedRun) error {
			moved = x.Status == messages.RunScaleOutRequested
			if moved {
				x.Status = messages.RunQueued
			}
			return nil
		}); err != nil {
			return n, fmt.Errorf("requeue run %s: %w", r.SharedRunId, err)
		}
		if !moved {
			continue
		}
		if err := e.st.Enqueue(ctx, r.SharedRunId); err != nil {
			return n, fmt.Errorf("enqueue run %s: %w", r.SharedRunId, err)
		}
		e.ledger(ctx, &messages.LedgerEntry{Kind: kind, SharedRunId: r.SharedRunId, ExecutionId: r.ExecutionId,
			TenantId: r.GetSnapshot().GetTenantId(), Reason: reason, Data: mustJSON(map[string]any{"request_id": requestID})})
		n++
	}
	if n > 0 && c.wakePump != nil {
		c.wakePump()
	}
	return n, nil
}
