package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// RecovererStore is the state the recoverer reads and writes.
type RecovererStore interface {
	store.Leases
	store.Registry
	store.Runs
	store.Executions
	store.Reservations
	store.Queue
	store.ScaleOuts
}

// RecovererConfig configures a Recoverer. The zero value of each tunable means its default;
// the fields marked required must be set.
type RecovererConfig struct {
	// NodeID is this node's id (HostId of its instances). Required.
	NodeID string
	// Incarnation is this process's actor system id (NodeId of its instances; lease holder).
	// Required.
	Incarnation string
	// Interval is the recovery round's tick; the "recovery" lease lasts 3 intervals + 1s.
	// Default 1s.
	Interval time.Duration
	// HeartbeatInterval is how often instances refresh their holds. Default 1s.
	HeartbeatInterval time.Duration
	// ReservationTTL is the pump's slot hold. Default 30s.
	ReservationTTL time.Duration
	// Ledger records recoveries. Required.
	Ledger Ledger
	// OnRequeued is called after a run went back to the shared queue (wakes the pump). Optional.
	OnRequeued func()
	// Log defaults to no logging.
	Log *zap.Logger
}

// Validate reports a missing required field.
func (c RecovererConfig) Validate() error {
	if c.NodeID == "" || c.Incarnation == "" || c.Ledger == nil {
		return errors.New("controlplane: recoverer config: NodeID, Incarnation and Ledger are required")
	}
	return nil
}

func (c RecovererConfig) withDefaults() RecovererConfig {
	defaultDuration(&c.Interval, time.Second)
	defaultDuration(&c.HeartbeatInterval, time.Second)
	defaultDuration(&c.ReservationTTL, 30*time.Second)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	return c
}

// Recoverer finds runs whose runtime instance is gone (its registry entry expired, belonged to
// an earlier incarnation of this node, or to a member the cluster lost), fences their
// executions by bumping the epoch, and requeues them as recovery runs; the pump re-admits them
// under the same tenant rules and the execution resumes from its committed steps with the
// same ExecutionId. It also requeues dispatches that never reached their instance, and repairs
// runs left between two writes by a crash.
//
// Several control planes may run it: a store lease ("recovery") makes one of them act per
// round, and every step is idempotent and conditional (the epoch bump only fences an execution
// still on the lost instance, the requeue only a run still assigned to it), so a round that
// outlives its lease and overlaps the next one does no harm. Its methods block on store I/O
// and are goroutine-safe.
type Recoverer struct {
	st  RecovererStore
	cfg RecovererConfig

	mu       sync.Mutex            // guards suspects and inflight
	suspects map[string]*Suspicion // active runs on live instances whose hold was stale, by run id
	inflight map[string]bool       // runs being recovered by a call of this recoverer, by run id
}

// NewRecoverer returns a recoverer over st.
func NewRecoverer(st RecovererStore, cfg RecovererConfig) (*Recoverer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Recoverer{st: st, cfg: cfg.withDefaults(), suspects: map[string]*Suspicion{}, inflight: map[string]bool{}}, nil
}

// activeStatuses are the statuses of a run that an instance holds.
var activeStatuses = []string{messages.RunDispatched, messages.RunRunning, messages.RunPaused}

// Round is one pass of the recovery coordinator (repair: also repair queued and parked runs).
// It does nothing when another control plane holds the recovery lease.
func (r *Recoverer) Round(ctx context.Context, repair bool) error {
	start := time.Now()
	ok, err := r.st.AcquireLease(ctx, "recovery", r.cfg.Incarnation, 3*r.cfg.Interval+time.Second)
	if err != nil {
		return fmt.Errorf("recovery lease: %w", err)
	}
	if !ok {
		return nil
	}
	lost, held := 0, 0
	suspects := map[string]*Suspicion{}
	err = r.eachActivePage(ctx, func(onLost, onLive []*messages.SharedRun) error {
		lost, held = lost+len(onLost), held+len(onLive)
		// The runs of lost instances first: they are what a member loss waits for.
		r.recoverLost(ctx, onLost, "runtime-instance-lost")
		s, err := r.checkHeld(ctx, onLive)
		for id, x := range s {
			suspects[id] = x
		}
		return err
	})
	r.cfg.Log.Debug("recovery round", zap.Int("lost", lost), zap.Int("held", held), zap.Duration("took", time.Since(start)))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.suspects = suspects // runs no longer suspect (or gone) are forgotten
	r.mu.Unlock()
	if repair {
		return r.Repair(ctx)
	}
	return nil
}

// roundParallelism is how many runs a round works on at once: each recovery is a few
// sequential store round trips, and a lost member may leave hundreds of runs.
const roundParallelism = 16

// heldRun is an active run on a live instance with what a round judged of it.
type heldRun struct {
	run          *messages.SharedRun
	dispatchLost bool // marked dispatched, and its instance never extended its hold
	verdict      OrphanVerdict
	suspicion    *Suspicion
}

// checkHeld recovers the runs on live instances whose dispatch never arrived, or whose
// execution their instance no longer has, and returns the suspicions to keep for the next
// round. The holds of all of them are read first, a store round trip per instance and
// holdsBatch runs: a round judges every run but calls the store again only for those it
// recovers, so a node with 100,000 sleeping runs does not make 100,000 calls a second.
func (r *Recoverer) checkHeld(ctx context.Context, held []*messages.SharedRun) (map[string]*Suspicion, error) {
	holds, err := r.holds(ctx, held)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	prevs := r.suspects
	r.mu.Unlock()
	now, rules := time.Now(), r.orphanRules()
	suspects := map[string]*Suspicion{}
	var act []heldRun
	for _, run := range held {
		until := holds[run.SharedRunId]
		h := heldRun{run: run, dispatchLost: r.dispatchLost(now, run, until)}
		// The hold is stamped by the store's clock (wall time), not by the node's.
		h.verdict, h.suspicion = JudgeOrphan(now, Hold{Until: until}, prevs[run.SharedRunId], rules)
		switch {
		case h.dispatchLost || h.verdict == OrphanLost:
			act = append(act, h)
		case h.suspicion != nil:
			suspects[run.SharedRunId] = h.suspicion
		}
	}
	var mu sync.Mutex // guards suspects
	workgroup.Each(act, roundParallelism, func(h heldRun) {
		if s := r.recoverHeld(ctx, h); s != nil {
			mu.Lock()
			suspects[h.run.SharedRunId] = s
			mu.Unlock()
		}
	})
	return suspects, nil
}

// holdsBatch is how many runs' holds one store call reads.
const holdsBatch = 1000

// holds returns the live hold of each run on its assigned instance (absent: none).
func (r *Recoverer) holds(ctx context.Context, runs []*messages.SharedRun) (map[string]time.Time, error) {
	byInstance := map[string][]string{}
	for _, run := range runs {
		byInstance[run.AssignedRuntimeInstanceId] = append(byInstance[run.AssignedRuntimeInstanceId], run.SharedRunId)
	}
	out := make(map[string]time.Time, len(runs))
	for inst, ids := range byInstance {
		for len(ids) > 0 {
			n := min(len(ids), holdsBatch)
			until, err := r.st.ReservationExpiries(ctx, inst, ids[:n])
			if err != nil {
				return nil, fmt.Errorf("read holds: %w", err)
			}
			for i, u := range until {
				if !u.IsZero() {
					out[ids[i]] = u
				}
			}
			ids = ids[n:]
		}
	}
	return out, nil
}

// recoverHeld acts on what checkHeld judged of h: a lost dispatch is requeued; a run left
// without execution is fenced and requeued. It returns the run's suspicion to keep (nil:
// none).
func (r *Recoverer) recoverHeld(ctx context.Context, h heldRun) *Suspicion {
	run := h.run
	if h.dispatchLost {
		moved, err := r.requeueLostDispatch(ctx, run)
		if err != nil {
			r.cfg.Log.Warn("recover lost dispatch", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
		}
		if moved || err != nil {
			return nil
		}
	}
	if h.verdict != OrphanLost {
		return h.suspicion
	}
	r.cfg.Log.Warn("no execution of the run is alive on its instance; recovering it", zap.String("tenant_id", run.TenantId),
		zap.String("shared_run_id", run.SharedRunId), zap.String("runtime_instance_id", run.AssignedRuntimeInstanceId),
		zap.String("execution_id", run.ExecutionId), zap.String("status", run.Status))
	if err := r.RecoverRun(ctx, run, "execution-lost"); err != nil {
		r.cfg.Log.Warn("recover lost execution", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
	}
	return nil
}

// orphanRules are the timings of JudgeOrphan for this recoverer's heartbeat and hold TTL.
func (r *Recoverer) orphanRules() OrphanRules {
	return OrphanRules{TTL: r.cfg.ReservationTTL, Stale: 2*r.cfg.HeartbeatInterval + lostDispatchSlack,
		Confirm: r.cfg.HeartbeatInterval + lostDispatchSlack}
}

// liveInstances returns the ids of the registry's serving instances, dropping the entries an
// earlier incarnation of this node left: this process does not run them, whatever their
// heartbeat says.
func (r *Recoverer) liveInstances(ctx context.Context) (map[string]bool, error) {
	insts, err := r.st.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	live := map[string]bool{}
	for _, d := range insts {
		if d.HostId == r.cfg.NodeID && d.NodeId != r.cfg.Incarnation {
			if err := r.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
				return nil, fmt.Errorf("drop stale instance %s: %w", d.RuntimeInstanceId, err)
			}
			r.cfg.Log.Info("dropped instance of an earlier incarnation", zap.String("runtime_instance_id", d.RuntimeInstanceId))
			continue
		}
		if d.Status == messages.InstanceUnhealthy || d.Status == messages.InstanceStopped {
			continue
		}
		live[d.RuntimeInstanceId] = true
	}
	return live, nil
}

// requeueTimeout bounds the requeue that follows a fence, which outlives its caller's context.
const requeueTimeout = 10 * time.Second

// RecoverRun fences the run's execution and puts the run back in the shared queue. run may be
// an old view (the round listed it a while ago; another round may have moved it since): the
// run is read again first and left alone unless it is still as listed (TakeForRecovery); only
// an execution still on the lost instance, or on none, is fenced, never the activation that
// replaced it, and only a run still as listed is requeued.
func (r *Recoverer) RecoverRun(ctx context.Context, run *messages.SharedRun, reason string) error {
	var epoch int64
	lost := run.AssignedRuntimeInstanceId
	cur, err := r.st.GetRun(ctx, run.SharedRunId)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("read run: %w", err)
	case !TakeForRecovery(cur, run):
		return nil // it moved since it was listed
	}
	if run.ExecutionId != "" {
		ep, fenced, err := r.st.FenceExecution(ctx, run.ExecutionId, "recovery:"+r.cfg.Incarnation, lost)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fmt.Errorf("fence execution %s: %w", run.ExecutionId, err)
		case !fenced:
			return nil // a newer activation on another instance owns it: the run has moved
		}
		epoch = ep
		// The fence is written: the requeue must follow even if the caller gives up now (a
		// round cancelled as its node stops left fenced runs running on a live instance).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), requeueTimeout)
		defer cancel()
	}
	moved, err := r.requeueFrom(ctx, run.SharedRunId, lost, func(x *messages.SharedRun) bool { return TakeForRecovery(x, run) },
		recoveryEntry(run, epoch, reason))
	if moved {
		r.requeued(run, epoch)
	}
	return err
}

// requeueFrom puts a run assigned to instance back in the shared queue when take accepts its
// current record (take may also change it; it is called inside the conditional update), with
// entry appended to the run's ledger in the same store write, then releases the run's hold on
// instance and wakes the pump. The entry is written before the run can be claimed again, so
// it precedes in the ledger whatever the run's next activation records (at a higher epoch).
// It reports whether the run moved.
func (r *Recoverer) requeueFrom(ctx context.Context, runID, instance string, take func(*messages.SharedRun) bool, entry *messages.LedgerEntry) (bool, error) {
	_, moved, err := r.cfg.Ledger.FinishRun(ctx, runID, entry, func(x *messages.SharedRun) bool {
		if x.AssignedRuntimeInstanceId != instance || !take(x) {
			return false
		}
		x.Status = messages.RunQueued
		return true
	})
	if err != nil {
		return false, fmt.Errorf("requeue run: %w", err)
	}
	if !moved {
		return false, nil
	}
	// The hold would keep a slot of the instance for nothing until it lapsed.
	if err := r.st.ReleaseReservation(ctx, instance, runID); err != nil {
		r.cfg.Log.Warn("release reservation", zap.String("runtime_instance_id", instance), zap.Error(err))
	}
	// At the front of the queue: the run had its turn (it was dispatched), and the runs queued
	// after it must not take its place (under a tenant's concurrency quota, the slot it held).
	if err := r.st.EnqueueFront(ctx, runID); err != nil {
		return true, fmt.Errorf("enqueue run: %w", err)
	}
	if r.cfg.OnRequeued != nil {
		r.cfg.OnRequeued()
	}
	return true, nil
}

// lostDispatchSlack is how much later than the pump's own hold an instance's refresh must
// reach for the run to count as received. It absorbs clock differences between the pump's
// and the instance's nodes; a misjudgement only requeues a run its instance then declines.
const lostDispatchSlack = 500 * time.Millisecond

// RecoverLostDispatch requeues a run marked dispatched to a live instance that never received
// it: the pump that marked it died before delivering it. The pump reserved the run's slot just
// before marking it (so that hold lapses no later than UpdatedAt+ReservationTTL), and an
// instance extends the hold of every run it has on receipt and at each heartbeat. A run still
// dispatched two heartbeats later whose hold was never extended is on no instance. The
// requeue is conditional on the run being unchanged since it was listed, and an instance that
// gets the dispatch late will not start it (the run is no longer assigned to it), so nothing
// runs twice.
func (r *Recoverer) RecoverLostDispatch(ctx context.Context, run *messages.SharedRun) error {
	until, err := r.st.ReservationExpiries(ctx, run.AssignedRuntimeInstanceId, []string{run.SharedRunId})
	if err != nil {
		return err
	}
	if !r.dispatchLost(time.Now(), run, until[0]) {
		return nil
	}
	_, err = r.requeueLostDispatch(ctx, run)
	return err
}

// dispatchLost reports whether run, as listed, is marked dispatched to an instance that never
// extended the hold its pump took (until: the hold's expiry, zero when none), two heartbeats
// after the mark. UpdatedAt and the hold are stamped by the store's clock (wall time), not by
// the node's (which tests may move by hours). It is pure.
func (r *Recoverer) dispatchLost(now time.Time, run *messages.SharedRun, until time.Time) bool {
	if run.Status != messages.RunDispatched {
		return false
	}
	dispatched := time.Unix(0, run.UpdatedAt)
	if now.Sub(dispatched) < 2*r.cfg.HeartbeatInterval+lostDispatchSlack {
		return false
	}
	return !until.After(dispatched.Add(r.cfg.ReservationTTL + lostDispatchSlack)) // else the instance has it
}

// requeueLostDispatch requeues run, judged dispatchLost, if it is still dispatched as listed;
// it reports whether the run moved.
func (r *Recoverer) requeueLostDispatch(ctx context.Context, run *messages.SharedRun) (bool, error) {
	inst := run.AssignedRuntimeInstanceId
	moved, err := r.requeueFrom(ctx, run.SharedRunId, inst, func(x *messages.SharedRun) bool {
		if x.Status != messages.RunDispatched || x.Attempts != run.Attempts {
			return false
		}
		x.FailureReason = "dispatch-lost"
		return true
	}, &messages.LedgerEntry{Kind: messages.KindDispatchFailed, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		RuntimeInstanceId: inst, TenantId: run.GetSnapshot().GetTenantId(), Reason: "dispatch-lost",
		Data: jsonOrNil(map[string]any{"pump_runtime_instance_id": run.PumpRuntimeInstanceId, "requeued_by": "recovery"})})
	if moved {
		r.cfg.Log.Warn("dispatched run never reached its instance; requeued", zap.String("tenant_id", run.TenantId),
			zap.String("shared_run_id", run.SharedRunId), zap.String("runtime_instance_id", inst),
			zap.String("pump_runtime_instance_id", run.PumpRuntimeInstanceId))
	}
	return moved, err
}

// Repair re-enqueues queued runs (Enqueue is a no-op for items already queued) and requeues
// runs parked for a scale-out request that has already finished.
func (r *Recoverer) Repair(ctx context.Context) error {
	err := r.st.ScanRuns(ctx, store.RunFilter{Status: messages.RunQueued}, activePage, func(queued []*messages.SharedRun) error {
		for _, run := range queued {
			if err := r.st.Enqueue(ctx, run.SharedRunId); err != nil {
				return fmt.Errorf("enqueue %s: %w", run.SharedRunId, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("repair queued runs: %w", err)
	}
	err = r.st.ScanRuns(ctx, store.RunFilter{Status: messages.RunScaleOutRequested}, activePage, func(parked []*messages.SharedRun) error {
		for _, run := range parked {
			req, err := r.st.GetScaleOut(ctx, run.ScaleOutRequestId)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if req != nil && (req.Status == messages.ScaleOutPending || req.Status == messages.ScaleOutProvisioning) {
				continue
			}
			if _, err := unpark(ctx, r.st, run.SharedRunId); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("repair parked runs: %w", err)
	}
	return nil
}

// DeclareDead fences everything a lost member ran: its tombstone is written (so the member, if
// it is only paused, stops when it resumes), its registry entries are removed (no new work),
// and the next recovery round requeues its runs with bumped epochs.
func (r *Recoverer) DeclareDead(ctx context.Context, member string) error {
	if _, err := r.st.AcquireLease(ctx, store.TombstoneLease(member), store.TombstoneHolderPrefix+r.cfg.Incarnation, 24*time.Hour); err != nil {
		return fmt.Errorf("tombstone %s: %w", member, err)
	}
	insts, err := r.st.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("list instances: %w", err)
	}
	for _, d := range insts {
		if d.NodeId == member {
			if err := r.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
				return fmt.Errorf("drop instance %s: %w", d.RuntimeInstanceId, err)
			}
			r.cfg.Log.Warn("instance of a lost member marked unsafe", zap.String("runtime_instance_id", d.RuntimeInstanceId), zap.String("member", member))
		}
	}
	return nil
}

// IsDeclaredDead reports whether another node has declared this incarnation dead. It takes the
// tombstone lease for a millisecond when free, which leaves nothing behind.
func (r *Recoverer) IsDeclaredDead(ctx context.Context) (bool, error) {
	ok, err := r.st.AcquireLease(ctx, store.TombstoneLease(r.cfg.Incarnation), r.cfg.Incarnation, time.Millisecond)
	if err != nil {
		return false, err
	}
	return !ok, nil
}

// ReleasePumpClaims makes the queue items claimed by nodeID's pump pending at once (that pump
// is gone: its member was lost, or its node restarted) and returns how many.
func (r *Recoverer) ReleasePumpClaims(ctx context.Context, nodeID string) (int, error) {
	return r.st.ReleaseClaimsOf(ctx, PumpID(nodeID))
}

// MemberLost declares a lost member (its actor system id, and the node id it ran as) dead,
// takes over its recovery lease and queue claims, and (round: on a control-plane node)
// requeues the runs of lost instances at once, unless another control plane is already doing
// it for this member.
func (r *Recoverer) MemberLost(ctx context.Context, member, nodeID string, round bool) {
	log := r.cfg.Log.With(zap.String("member", member), zap.String("node", nodeID))
	log.Warn("cluster member lost")
	if err := r.DeclareDead(ctx, member); err != nil {
		log.Warn("declare member dead", zap.Error(err))
		return
	}
	if err := r.st.ReleaseLease(ctx, "recovery", member); err != nil {
		log.Warn("release lost member's recovery lease", zap.Error(err))
	}
	// Its pump's queue claims come back now rather than after their visibility timeout (30 s
	// by default). A node restarted under the same node id releases them itself on start.
	if nodeID != "" && nodeID != r.cfg.NodeID {
		if k, err := r.ReleasePumpClaims(ctx, nodeID); err != nil {
			log.Warn("release lost member's queue claims", zap.Error(err))
		} else if k > 0 {
			log.Info("released lost member's queue claims", zap.Int("items", k))
			if r.cfg.OnRequeued != nil {
				r.cfg.OnRequeued()
			}
		}
	}
	if round {
		if err := r.recoverMember(ctx, member); err != nil {
			log.Warn("recovery after member loss", zap.Error(err))
		}
	}
}
