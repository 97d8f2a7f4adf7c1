package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/admission"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// The fast dispatch path, used when the store is a store.Assigner: a pump cycle claims its
// batch and reads the claimed runs in one call; each decision is taken on the dispatcher's
// instance view (no store read) and carried out by one Assign call (capacity re-check,
// reservation, assignment, queue removal and the decision's ledger entries). A decision that
// would not assign is confirmed on a fresh view before it is acted on, so a stale view never
// parks, rejects or delays a run that fresh data would have dispatched.

// maxAssignTries bounds the decisions of one dispatch (instances found full, runs changed).
const maxAssignTries = 4

// fastCycle reports whether this cycle may take the fast path: the store is a
// store.Assigner and, over a store with per-tenant queues, at most one tenant has runs waiting
// and it has no quota (max_concurrent_runs, runs_per_second). Otherwise fair order and the
// quotas' atomic holds decide, on the fair path (fair.go). It records the waiting tenants for
// the wait reasons, as a fair claim does. It blocks on one store read (the backlog).
func (d *Dispatcher) fastCycle(ctx context.Context) (bool, error) {
	if d.asg == nil {
		return false, nil
	}
	if d.fair == nil {
		return true, nil
	}
	backlog, err := d.fair.st.Backlog(ctx, d.cfg.Batch)
	if err != nil || len(backlog) > 1 {
		return false, err
	}
	if len(backlog) == 1 {
		if ok, err := d.fastAllowed(ctx, backlog[0].TenantID); !ok || err != nil {
			return false, err
		}
	}
	f := d.fair
	f.mu.Lock()
	f.waiting = make(map[string]bool, len(backlog))
	for _, b := range backlog {
		f.waiting[b.TenantID] = true
	}
	f.more = false
	f.mu.Unlock()
	return true, nil
}

// fastAllowed reports whether a run of tenantID may be dispatched on the fast path: the store
// is a store.Assigner and the tenant has no quota whose hold the fast path does not take
// (max_concurrent_runs, runs_per_second), and, for a hand-off, no other tenant waits.
func (d *Dispatcher) fastAllowed(ctx context.Context, tenantID string) (bool, error) {
	if d.asg == nil {
		return false, nil
	}
	if d.fair == nil {
		return true, nil
	}
	t, err := d.cfg.Tenants.Get(ctx, tenantID)
	if err != nil {
		return false, err
	}
	return !quotaBound(t) && !d.contended(tenantID), nil
}

// quotaBound reports whether t has a quota whose hold only the fair path takes
// (max_concurrent_runs, runs_per_second).
func quotaBound(t *messages.TenantSettings) bool {
	return t.MaxConcurrentRuns > 0 || t.RunsPerSecond > 0
}

// cycleFast is Cycle over a store.Assigner, for a cycle fastCycle allows.
func (d *Dispatcher) cycleFast(ctx context.Context, pumpID string) (claimed, settled int, err error) {
	claims, err := d.asg.ClaimRuns(ctx, pumpID, d.cfg.Batch, d.cfg.QueueVisibility)
	if err != nil {
		d.cfg.Log.Warn("claim shared queue", zap.String("pump_runtime_instance_id", pumpID), zap.Error(err))
		return 0, 0, err
	}
	defer d.queueDepth(ctx)
	var done atomic.Int64
	sem := make(chan struct{}, d.cfg.Parallelism)
	var wg sync.WaitGroup
	ts := turns(len(claims)) // the runs decide in queue order
	for i, cl := range claims {
		tn := ts[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() { // joined by wg.Wait below
			defer func() { <-sem; wg.Done() }()
			defer tn.pass()
			if d.settleFast(ctx, cl, pumpID, tn) == Done {
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	d.waiting.Store(int(done.Load()) < len(claims))
	return len(claims), int(done.Load()), nil
}

// settleFast dispatches one claimed run, deciding in its turn, and acks or releases its claim
// (an assignment removed the queue entry already).
func (d *Dispatcher) settleFast(ctx context.Context, cl store.ClaimedRun, pumpID string, tn *turn) Outcome {
	out, assigned, err := d.dispatchVersioned(ctx, cl.Run, cl.Version, pumpID, false, tn)
	if err != nil {
		d.cfg.Log.Warn("dispatch run", zap.String("shared_run_id", cl.RunID), zap.Error(err))
	}
	if assigned {
		return out // the queue entry is gone (or back, after a failed delivery)
	}
	if out == Done {
		err = d.st.Ack(ctx, cl.Claim)
	} else {
		err = d.st.Release(ctx, cl.Claim)
	}
	if err != nil && !errors.Is(err, store.ErrClaimLost) {
		d.cfg.Log.Warn("settle queue claim", zap.String("shared_run_id", cl.RunID), zap.Error(err))
	}
	return out
}

// HandOff dispatches a new run, one its caller has not stored yet, without the pump: when the
// instance view shows tenant-visible free capacity and the pump's last cycle left no run
// waiting (a hand-off never overtakes runs that wait for capacity; it may pass runs that are
// only not claimed yet, which the next cycle dispatches anyway), one Assign call creates the
// run already assigned, holds its slot and appends pre (the run's "submitted" entry) and the
// decision's entries; the run is then delivered. It reports true when the run was assigned,
// false when nothing was written and the caller must create and queue the run (no room in
// the view, the store is no store.Assigner, or a run with an idempotency key, which CreateRun
// handles). It never parks, rejects or records a wait: that stays the pump's. It blocks on
// store and provider I/O.
func (d *Dispatcher) HandOff(ctx context.Context, run *messages.SharedRun, pumpID string, pre ...*messages.LedgerEntry) (bool, error) {
	if d.asg == nil || d.waiting.Load() || run.IdempotencyKey != "" || run.GetSnapshot().GetTenantId() == "" {
		return false, nil
	}
	if ok, err := d.fastAllowed(ctx, run.GetSnapshot().GetTenantId()); !ok || err != nil {
		return false, err
	}
	_, assigned, err := d.dispatchVersioned(ctx, run, store.NewRunVersion, pumpID, true, nil, pre...)
	return assigned, err
}

// DispatchCreated is DispatchRun for a run its caller has just created: over a
// store.Assigner it takes the decision on the instance view and writes it in one call.
// It reports whether the run was assigned (it then has no queue entry to settle).
func (d *Dispatcher) DispatchCreated(ctx context.Context, run *messages.SharedRun, pumpID string) (Outcome, error) {
	if ok, err := d.fastAllowed(ctx, run.GetSnapshot().GetTenantId()); !ok || err != nil {
		return d.DispatchRun(ctx, run.SharedRunId, pumpID, nil)
	}
	out, _, err := d.dispatchVersioned(ctx, run, store.CreatedRunVersion, pumpID, false, nil)
	return out, err
}

// dispatchVersioned decides for run (read at version ver), in its turn tn (nil: at once), and
// carries the decision out. With onlyAssign, a decision other than an assignment on the cached
// view changes nothing and returns Requeue. It reports whether this call assigned the run.
func (d *Dispatcher) dispatchVersioned(ctx context.Context, run *messages.SharedRun, ver int64, pumpID string, onlyAssign bool,
	tn *turn, pre ...*messages.LedgerEntry) (Outcome, bool, error) {
	defer tn.pass()
	if run == nil || run.Status != messages.RunQueued {
		return Done, false, nil // gone, or already dispatched, parked or final: a stale queue entry
	}
	snap := run.Snapshot
	if snap == nil || snap.TenantId == "" {
		return Done, false, d.reject(ctx, run, "missing-execution-context")
	}
	t, err := d.cfg.Tenants.Get(ctx, snap.TenantId)
	if err != nil {
		return Requeue, false, err
	}
	if d.fair != nil && quotaBound(t) {
		// A run of a quota-bound tenant that a fast cycle claimed anyway (it was queued after
		// the cycle read the backlog) is dispatched on the fair path, which takes the quota's
		// hold with the slot.
		if onlyAssign {
			return Requeue, false, nil
		}
		out, err := d.dispatchRun(ctx, run.SharedRunId, pumpID, nil, tn)
		return out, false, err
	}
	tn.wait(ctx)
	if reason, ok := tn.blocked(snap.TenantId); ok {
		// A run of the tenant ahead of this one waits: this one waits behind it.
		d.wait(ctx, run, reason, admissionEntry(run, admission.Decision{Kind: admission.QueueGlobally, Reason: reason}))
		return Requeue, false, nil
	}
	f := fastDecision{d: d, run: run, ver: ver, t: t, pumpID: pumpID, pending: -1, pre: pre, turn: tn}
	for try := 0; try < maxAssignTries; try++ {
		out, assigned, next, err := f.step(ctx, onlyAssign)
		if !next {
			return out, assigned, err
		}
	}
	if !onlyAssign { // a hand-off's run may not be stored: its caller queues it, nothing to note
		tn.block(snap.TenantId, ReasonNoFreeSlot)
		d.wait(ctx, f.run, ReasonNoFreeSlot, f.full...)
	}
	return Requeue, false, nil
}

// fastDecision is the state of one dispatch on the fast path.
type fastDecision struct {
	d       *Dispatcher
	run     *messages.SharedRun
	ver     int64
	t       *messages.TenantSettings
	pumpID  string
	fresh   bool                    // the view was read from the store for this dispatch
	pending int                     // pending scale-outs, once read (-1: not read)
	full    []*messages.LedgerEntry // refused reservations, recorded with the last decision
	pre     []*messages.LedgerEntry // entries written with the assignment only (HandOff)
	// versions are the registry versions of the view the last decision was taken on, held
	// its holds without the slots in flight (inflight).
	versions map[string]int64
	held     map[string]int
	turn     *turn // passed once the first decision is taken (and its slot counted in flight)
	// busyWaits counts the waits for slots in flight (inflight.take).
	busyWaits int
}

// step takes one decision and carries it out; next reports that another decision is needed.
func (f *fastDecision) step(ctx context.Context, onlyAssign bool) (out Outcome, assigned, next bool, err error) {
	d := f.d
	dec, insts, err := f.decide(ctx)
	if err != nil {
		return Requeue, false, false, err
	}
	if dec.Kind != admission.AssignToInstance {
		if onlyAssign {
			return Requeue, false, false, nil
		}
		if !f.fresh {
			f.fresh = true // confirm a refusal on fresh data before acting on it
			return Requeue, false, true, nil
		}
		return f.settle(ctx, dec)
	}
	x := find(insts, dec.InstanceID)
	release, busy, ok := d.inflight.take(x, f.held[x.RuntimeInstanceId])
	if !ok {
		// The slot the view shows is being taken by a dispatch in flight: once it answered,
		// decide again on counts that include it.
		if busy != nil && f.busyWaits < maxBusyWaits && awaitBusy(ctx, busy) {
			f.busyWaits++
			return Requeue, false, true, nil
		}
		f.d.view.full(x.RuntimeInstanceId, int(x.MaxConcurrentRuns))
		return Requeue, false, true, nil
	}
	defer release()
	f.turn.pass()
	d.cfg.Metrics.Admission(dec.Kind.String(), dec.Reason)
	upd := proto.Clone(f.run).(*messages.SharedRun)
	upd.Status, upd.AssignedRuntimeInstanceId, upd.PumpRuntimeInstanceId = messages.RunDispatched, x.RuntimeInstanceId, f.pumpID
	upd.Attempts++
	upd.FailureReason = ""
	admitted := admissionEntry(f.run, dec)
	resv := reservationEntry(f.run, x, "reserved")
	a := store.Assignment{Run: upd, Version: f.ver, InstanceID: x.RuntimeInstanceId,
		InstanceVersion: f.versions[x.RuntimeInstanceId], Limit: int(x.MaxConcurrentRuns), TTL: d.cfg.ReservationTTL, Ledger: append(append(f.pre[:len(f.pre):len(f.pre)], f.full...), admitted, resv)}
	res, held, forget, err := f.assign(ctx, a)
	defer forget()
	if err != nil {
		return Requeue, false, false, fmt.Errorf("assign %s: %w", x.RuntimeInstanceId, err)
	}
	switch res {
	case store.Assigned:
		d.view.assigned(x.RuntimeInstanceId)
	case store.InstanceFull:
		d.view.full(x.RuntimeInstanceId, held)
	}
	release() // the view's holds include it now, if it was written
	switch res {
	case store.Assigned:
		return d.handOver(ctx, upd, x, f.pumpID), true, false, nil
	case store.InstanceFull:
		// The next decision sees the instance without a free slot (the view says so now).
		f.full = append(f.full, admitted, reservationEntry(f.run, x, ReasonNoFreeSlot))
		return Requeue, false, true, nil
	case store.InstanceChanged:
		// The instance published since the view was read (paused, drained, resized): decide
		// again on a fresh view.
		f.fresh = true
		return Requeue, false, true, nil
	}
	run, ver, err := d.asg.GetRunVersion(ctx, f.run.SharedRunId)
	if errors.Is(err, store.ErrNotFound) || (err == nil && run.Status != messages.RunQueued) {
		return Done, false, false, nil // dispatched by another pump or handoff, or finished
	}
	if err != nil {
		return Requeue, false, false, fmt.Errorf("reload run: %w", err)
	}
	f.run, f.ver = run, ver
	return Requeue, false, true, nil
}

// assign writes a, with the start of the run's execution when the dispatcher has a
// store.StartingAssigner and its Prestarter prepares one for a new run: then an assigned a.Run
// is updated to what the store wrote (running, named by the execution). forget drops the
// start's preparation once the delivery answered.
func (f *fastDecision) assign(ctx context.Context, a store.Assignment) (res store.AssignResult, held int, forget func(), err error) {
	d := f.d
	if d.starter != nil && a.Run.ExecutionId == "" {
		if st, forget, ok := d.cfg.Prestarter.Prestart(a.Run, a.InstanceID); ok {
			res, held, started, err := d.starter.AssignAndStart(ctx, a, st)
			if err == nil && res == store.Assigned {
				store.MarkStarted(a.Run, st.Execution.ExecutionId, a.InstanceID, st.Execution.LocalRunId)
				d.cfg.Prestarter.Started(a.Run, started)
			}
			return res, held, forget, err
		}
	}
	res, held, err = d.asg.Assign(ctx, a)
	return res, held, func() {}, err
}

// decide asks admission on the instance view (fresh when f.fresh).
func (f *fastDecision) decide(ctx context.Context) (admission.Decision, []*messages.CapacityDescriptor, error) {
	d := f.d
	v, err := d.view.get(ctx, f.fresh)
	if err != nil {
		return admission.Decision{}, nil, err
	}
	f.versions, f.held = v.versions, v.reserved
	insts, reserved := v.insts, maps.Clone(v.reserved)
	d.inflight.add(reserved)
	insts = d.cfg.Circuits.Overlay(insts, d.cfg.Now())
	if d.cfg.Members != nil {
		insts = MemberOverlay(insts, d.cfg.Members())
	}
	in := admission.Input{Snapshot: f.run.Snapshot, Tenant: f.t, Instances: insts, Reserved: reserved,
		HeartbeatTimeout: d.cfg.HeartbeatTTL, Now: d.cfg.Now(), PendingScaleOuts: max(f.pending, 0)}
	dec := admission.Decide(in)
	if dec.Kind == admission.RequestScaleOut && f.fresh && f.pending < 0 {
		// Pending scale-outs matter only when admission wants more capacity: read them then.
		if f.pending, err = d.cfg.Scaler.Pending(ctx, f.t); err != nil {
			return admission.Decision{}, nil, err
		}
		in.PendingScaleOuts = f.pending
		dec = admission.Decide(in)
	}
	return dec, insts, nil
}

// settle carries out a decision other than an assignment, taken on a fresh view.
func (f *fastDecision) settle(ctx context.Context, dec admission.Decision) (Outcome, bool, bool, error) {
	d := f.d
	admitted := admissionEntry(f.run, dec)
	d.cfg.Metrics.Admission(dec.Kind.String(), dec.Reason)
	if dec.Kind != admission.QueueGlobally {
		f.turn.pass()
	}
	switch dec.Kind {
	case admission.QueueGlobally:
		reason := dec.Reason
		if len(f.full) > 0 {
			reason = ReasonNoFreeSlot
		}
		f.turn.block(f.run.GetSnapshot().GetTenantId(), reason) // the tenant's later runs wait behind this one
		d.wait(ctx, f.run, reason, append(f.full, admitted)...)
		return Requeue, false, false, nil
	case admission.RequestScaleOut:
		d.cfg.Ledger.Record(ctx, append(f.full, admitted)...)
		return Done, false, false, d.cfg.Scaler.ParkRun(ctx, f.run, f.t, dec.Reason)
	}
	d.cfg.Ledger.Record(ctx, append(f.full, admitted)...)
	return Done, false, false, d.reject(ctx, f.run, dec.Reason)
}
