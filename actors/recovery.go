package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// recoveryCoordinator finds runs whose runtime instance is gone (its registry entry expired or
// belonged to an earlier incarnation of this node), fences their executions by bumping the
// epoch, and requeues them as recovery runs; the pump re-admits them under the same tenant rules
// and the execution resumes from its committed steps with the same ExecutionId. It also repairs
// runs left between two writes by a crash (queued but not in the queue, parked for a scale-out
// that already finished).
//
// Several control planes may run it: a store lease ("recovery") makes one of them act per
// round, and every step is idempotent and conditional (the epoch bump only fences an
// execution still on the lost instance, the requeue only a run still assigned to it), so a
// round that outlives its lease and overlaps the next one does no harm.
type recoveryCoordinator struct {
	core   *core
	busy   bool
	cancel func()
	rounds int
}

type recoveryTick struct{}
type recoveryDone struct{}

func (r *recoveryCoordinator) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		r.cancel = tickTo(r.core.env.system, c.Self(), r.core.env.cfg.RecoveryInterval, &recoveryTick{})
		c.Send(c.Self(), &recoveryTick{})
	case *actor.Stopping, *actor.Restarting:
		if r.cancel != nil {
			r.cancel()
			r.cancel = nil
		}
	case *recoveryTick:
		if r.busy {
			return
		}
		r.busy = true
		full := r.rounds%30 == 0 // every 30th round also repairs queued/parked runs
		r.rounds++
		self, sys := c.Self(), r.core.env.system
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.core.recoverRound(ctx, full); err != nil {
				r.core.env.log.Warn("recovery round", zap.Error(err))
			}
			sys.Root.Send(self, &recoveryDone{})
		}()
	case *recoveryDone:
		r.busy = false
	}
}

// recoverRound is one pass of the coordinator.
func (c *core) recoverRound(ctx context.Context, repair bool) error {
	e := c.env
	ok, err := e.st.AcquireLease(ctx, "recovery", e.incarnation, 3*e.cfg.RecoveryInterval+time.Second)
	if err != nil {
		return fmt.Errorf("recovery lease: %w", err)
	}
	if !ok {
		return nil
	}
	insts, err := e.st.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("list instances: %w", err)
	}
	live := map[string]bool{}
	for _, d := range insts {
		// An entry published by an earlier incarnation of this node is dead: this process
		// does not run it, whatever its heartbeat says.
		if d.HostId == e.nodeID && d.NodeId != e.incarnation {
			if err := e.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
				return fmt.Errorf("drop stale instance %s: %w", d.RuntimeInstanceId, err)
			}
			e.log.Info("dropped instance of an earlier incarnation", zap.String("runtime_instance_id", d.RuntimeInstanceId))
			continue
		}
		if d.Status == messages.InstanceUnhealthy || d.Status == messages.InstanceStopped {
			continue
		}
		live[d.RuntimeInstanceId] = true
	}
	for _, status := range []string{messages.RunDispatched, messages.RunRunning, messages.RunPaused} {
		runs, err := e.st.ListRuns(ctx, store.RunFilter{Status: status, Limit: 100000})
		if err != nil {
			return fmt.Errorf("list %s runs: %w", status, err)
		}
		for _, r := range runs {
			if r.AssignedRuntimeInstanceId == "" {
				continue
			}
			if live[r.AssignedRuntimeInstanceId] {
				if status == messages.RunDispatched {
					if err := c.recoverLostDispatch(ctx, r); err != nil {
						e.log.Warn("recover lost dispatch", zap.String("tenant_id", r.TenantId), zap.String("shared_run_id", r.SharedRunId), zap.Error(err))
					}
				}
				continue
			}
			if err := c.recoverRun(ctx, r, "runtime-instance-lost"); err != nil {
				e.log.Warn("recover run", zap.String("tenant_id", r.TenantId), zap.String("shared_run_id", r.SharedRunId), zap.Error(err))
			}
		}
	}
	if repair {
		return c.repair(ctx)
	}
	return nil
}

// recoverRun fences the run's execution and puts the run back in the shared queue.
func (c *core) recoverRun(ctx context.Context, r *messages.SharedRun, reason string) error {
	e := c.env
	var epoch int64
	lost := r.AssignedRuntimeInstanceId
	if r.ExecutionId != "" {
		// r may be an old view (the round listed it a while ago; another round may have moved
		// it since): fence only an execution still on the lost instance or on none, never the
		// activation that replaced it.
		ep, fenced, err := e.st.FenceExecution(ctx, r.ExecutionId, "recovery:"+e.incarnation, lost)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fmt.Errorf("fence execution %s: %w", r.ExecutionId, err)
		case !fenced:
			return nil // a newer activation on another instance owns it: the run has moved
		}
		epoch = ep
	}
	moved, err := c.requeueFrom(ctx, r.SharedRunId, lost, func(x *messages.SharedRun) bool {
		active := x.Status == messages.RunDispatched || x.Status == messages.RunRunning || x.Status == messages.RunPaused
		if active {
			x.Recovery = true
		}
		return active
	}, &messages.LedgerEntry{Kind: messages.KindRecovery, SharedRunId: r.SharedRunId, ExecutionId: r.ExecutionId,
		RuntimeInstanceId: lost, Epoch: epoch, TenantId: r.GetSnapshot().GetTenantId(), Reason: reason,
		Data: mustJSON(map[string]any{"lost_runtime_instance_id": lost, "fenced_epoch": epoch})})
	if moved {
		e.log.Info("run requeued for recovery", zap.String("tenant_id", r.TenantId), zap.String("shared_run_id", r.SharedRunId), zap.String("execution_id", r.ExecutionId),
			zap.String("lost_runtime_instance_id", lost), zap.Int64("epoch", epoch))
	}
	return err
}

// requeueFrom puts a run assigned to instance back in the shared queue when take accepts its
// current record (take may also change it; it is called inside the conditional update), then
// releases the run's hold on instance, records entry and wakes the pump. It reports whether
// the run moved.
func (c *core) requeueFrom(ctx context.Context, runID, instance string, take func(*messages.SharedRun) bool, entry *messages.LedgerEntry) (bool, error) {
	e := c.env
	moved := false
	if _, err := e.st.UpdateRun(ctx, runID, func(x *messages.SharedRun) error {
		moved = x.AssignedRuntimeInstanceId == instance && take(x)
		if moved {
			x.Status = messages.RunQueued
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("requeue run: %w", err)
	}
	if !moved {
		return false, nil
	}
	// The hold would keep a slot of the instance for nothing until it lapsed.
	if err := e.st.ReleaseReservation(ctx, instance, runID); err != nil {
		e.log.Warn("release reservation", zap.String("runtime_instance_id", instance), zap.Error(err))
	}
	if err := e.st.Enqueue(ctx, runID); err != nil {
		return true, fmt.Errorf("enqueue run: %w", err)
	}
	e.ledger(ctx, entry)
	if c.wakePump != nil {
		c.wakePump()
	}
	return true, nil
}

// lostDispatchSlack is how much later than the pump's own hold an instance's refresh must
// reach for the run to count as received. It absorbs clock differences between the pump's
// and the instance's nodes; a misjudgement only requeues a run its instance then declines.
const lostDispatchSlack = 500 * time.Millisecond

// recoverLostDispatch requeues a run marked dispatched to a live instance that never received
// it: the pump that marked it died before delivering it. The pump reserved the run's slot just
// before marking it (so that hold lapses no later than UpdatedAt+ReservationTTL), and an
// instance extends the hold of every run it has on receipt and at each heartbeat. A run still
// dispatched two heartbeats later whose hold was never extended is on no instance. The
// requeue is conditional on the run being unchanged since it was listed, and an instance that
// gets the dispatch late will not start it (the run is no longer assigned to it), so nothing
// runs twice.
func (c *core) recoverLostDispatch(ctx context.Context, r *messages.SharedRun) error {
	e := c.env
	// UpdatedAt and the reservation are stamped by the store's clock (wall time), not by the
	// node's (cfg.Now, which tests may move by hours).
	dispatched := time.Unix(0, r.UpdatedAt)
	if time.Since(dispatched) < 2*e.cfg.HeartbeatInterval+lostDispatchSlack {
		return nil
	}
	inst := r.AssignedRuntimeInstanceId
	until, err := e.st.ReservationExpiry(ctx, inst, r.SharedRunId)
	if err != nil {
		return err
	}
	if until.After(dispatched.Add(e.cfg.ReservationTTL + lostDispatchSlack)) {
		return nil // the instance has it
	}
	moved, err := c.requeueFrom(ctx, r.SharedRunId, inst, func(x *messages.SharedRun) bool {
		if x.Status != messages.RunDispatched || x.Attempts != r.Attempts {
			return false
		}
		x.FailureReason = "dispatch-lost"
		return true
	}, &messages.LedgerEntry{Kind: messages.KindDispatchFailed, SharedRunId: r.SharedRunId, ExecutionId: r.ExecutionId,
		RuntimeInstanceId: inst, TenantId: r.GetSnapshot().GetTenantId(), Reason: "dispatch-lost",
		Data: mustJSON(map[string]any{"pump_runtime_instance_id": r.PumpRuntimeInstanceId, "requeued_by": "recovery"})})
	if moved {
		e.log.Warn("dispatched run never reached its instance; requeued", zap.String("tenant_id", r.TenantId), zap.String("shared_run_id", r.SharedRunId),
			zap.String("runtime_instance_id", inst), zap.String("pump_runtime_instance_id", r.PumpRuntimeInstanceId))
	}
	return err
}

// repair re-enqueues queued runs (Enqueue is a no-op for items already queued) and requeues
// runs parked for a scale-out request that has already finished.
func (c *core) repair(ctx context.Context) error {
	e := c.env
	queued, err := e.st.ListRuns(ctx, store.RunFilter{Status: messages.RunQueued, Limit: 100000})
	if err != nil {
		return fmt.Errorf("list queued runs: %w", err)
	}
	for _, r := range queued {
		if err := e.st.Enqueue(ctx, r.SharedRunId); err != nil {
			return fmt.Errorf("enqueue %s: %w", r.SharedRunId, err)
		}
	}
	parked, err := e.st.ListRuns(ctx, store.RunFilter{Status: messages.RunScaleOutRequested, Limit: 100000})
	if err != nil {
		return fmt.Errorf("list parked runs: %w", err)
	}
	for _, r := range parked {
		req, err := e.st.GetScaleOut(ctx, r.ScaleOutRequestId)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if req != nil && (req.Status == messages.ScaleOutPending || req.Status == messages.ScaleOutProvisioning) {
			continue
		}
		if _, err := e.st.UpdateRun(ctx, r.SharedRunId, func(x *messages.SharedRun) error {
			if x.Status == messages.RunScaleOutRequested {
				x.Status = messages.RunQueued
			}
			return nil
		}); err != nil {
			return err
		}
		if err := e.st.Enqueue(ctx, r.SharedRunId); err != nil {
			return err
		}
	}
	return nil
}
