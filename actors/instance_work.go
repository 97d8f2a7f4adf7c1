package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/local"
)

// instanceWorkTimeout bounds one piece of an instance's background store work.
const instanceWorkTimeout = 10 * time.Second

// rehydrate runs after a supervisor restart of the instance: its executions were stopped with
// the old incarnation, so each non-terminal execution it owned is re-dispatched to itself.
func (in *instance) rehydrate(c actor.Context) {
	e, id, self := in.env, in.spec.ID, c.Self()
	e.group.GoTimeout(15*time.Second, func(ctx context.Context) {
		execs, err := e.st.ListExecutionsByInstance(ctx, id)
		if err != nil {
			e.log.Warn("instance rehydrate", zap.String("runtime_instance_id", id), zap.Error(err))
			return
		}
		for _, ex := range execs {
			run, err := e.st.GetRun(ctx, ex.SharedRunId)
			if err != nil || messages.IsTerminalRun(run.Status) {
				continue
			}
			e.system.Root.Send(self, redispatch(id, run, "instance-rehydrate"))
		}
	})
}

// redispatch is the DispatchRequest an instance sends itself to run run again.
func redispatch(instanceID string, run *messages.SharedRun, source string) *messages.DispatchRequest {
	return &messages.DispatchRequest{RuntimeInstanceId: instanceID, SharedRunId: run.SharedRunId, PipelineKey: run.Pipeline,
		PipelineHash: run.PipelineHash, Input: run.Input, Snapshot: run.Snapshot, ExecutionId: run.ExecutionId,
		CorrelationId: run.CorrelationId, Source: source}
}

// resumeIfStillMine runs again a run whose execution here was fenced, when the store shows it
// dispatched to this instance again: a recovery that wrongly took this instance for lost (its
// heartbeat was late) fenced the execution and requeued the run, and the pump gave the run
// back to this instance while the fenced execution was still stopping, so that dispatch was
// taken for the one already running. Anywhere else, the run has moved and is not touched.
func (in *instance) resumeIfStillMine(c actor.Context, runID string) {
	e, id, self := in.env, in.spec.ID, c.Self()
	e.group.GoTimeout(instanceWorkTimeout, func(ctx context.Context) {
		run, err := e.st.GetRun(ctx, runID)
		if err != nil {
			e.log.Warn("check fenced run", zap.String("shared_run_id", runID), zap.Error(err))
			return
		}
		// Dispatched (not running): the pump handed the run back after the fence. A run still
		// "running" here is in the middle of a recovery that will requeue it, or was taken over.
		if run.AssignedRuntimeInstanceId != id || run.Status != messages.RunDispatched {
			return
		}
		e.log.Info("fenced run is still assigned here; running it again", zap.String("tenant_id", run.TenantId),
			zap.String("shared_run_id", runID), zap.String("runtime_instance_id", id))
		e.system.Root.Send(self, redispatch(id, run, "instance-refenced"))
	})
}

// release drops the slot reservation of a run that ended here.
func (in *instance) release(runID string) {
	e, id := in.env, in.spec.ID
	e.goCleanup(instanceWorkTimeout, func(ctx context.Context) {
		if err := e.st.ReleaseReservation(ctx, id, runID); err != nil {
			e.log.Warn("release reservation", zap.String("runtime_instance_id", id), zap.Error(err))
		}
	})
}

// releaseHolds drops the slot reservations of the runs a stopped instance still tracks (an
// execution that finished as the instance stopped could not report, so its hold would outlive
// the instance and keep the id from being reused until it lapsed). A node declared dead
// leaves them to recovery: its runs, and maybe its instance ids, already belong to others.
func (in *instance) releaseHolds() {
	if in.q == nil || in.env.dead.Load() {
		return
	}
	runs := in.q.Holds()
	if len(runs) == 0 {
		return
	}
	e, id := in.env, in.spec.ID
	e.goCleanup(instanceWorkTimeout, func(ctx context.Context) {
		for _, runID := range runs {
			if err := e.st.ReleaseReservation(ctx, id, runID); err != nil {
				e.log.Warn("release reservation of a stopped instance", zap.String("runtime_instance_id", id), zap.Error(err))
				return
			}
		}
	})
}

// failExecution fails an execution that cannot go on (its actor was given up on), and its run,
// only while the execution's epoch is still the one this instance acquired.
func failExecution(e *env, seed *execSeed, reason string) {
	execID, epoch, req, instanceID := seed.executionID, seed.epoch, seed.req, seed.instanceID
	if execID == "" || epoch == 0 {
		return // never started: recovery requeues the run
	}
	e.goCleanup(instanceWorkTimeout, func(ctx context.Context) {
		if _, err := e.st.UpdateExecution(ctx, execID, epoch, func(ex *messages.Execution) error {
			ex.Status, ex.FailureReason = messages.RunFailed, reason
			return nil
		}); err != nil {
			e.log.Warn("fail execution", zap.String("execution_id", execID), zap.Error(err))
			return
		}
		entry := &messages.LedgerEntry{Kind: messages.KindRunFailed, SharedRunId: req.SharedRunId,
			RuntimeInstanceId: instanceID, Reason: reason, TenantId: req.GetSnapshot().GetTenantId()}
		if endRun(ctx, e, req, entry, messages.RunFailed, reason) {
			e.metrics.RunFinished(messages.RunFailed)
		}
	})
}

// cancelQueued cancels a run that was still in an instance's local queue and drops its hold.
// started: the run's assignment started its execution (prestart.go), which ends with it.
func cancelQueued(e *env, req *messages.DispatchRequest, instanceID, reason string, started bool) {
	if reason == "" {
		reason = "cancelled"
	}
	e.goCleanup(instanceWorkTimeout, func(ctx context.Context) {
		entry := &messages.LedgerEntry{Kind: messages.KindRunCancelled, SharedRunId: req.SharedRunId, RuntimeInstanceId: instanceID,
			Reason: reason, TenantId: req.GetSnapshot().GetTenantId()}
		if started && e.life != nil {
			entry.ExecutionId, entry.Epoch = req.ExecutionId, 1
			res, err := e.life.FinishExecution(ctx, store.ExecutionFinish{ExecutionID: req.ExecutionId, Epoch: 1, RunID: req.SharedRunId,
				Status: messages.RunCancelled, FailureReason: reason, Entry: entry, InstanceID: instanceID})
			if err != nil {
				e.log.Warn("cancel started run", zap.String("shared_run_id", req.SharedRunId), zap.Error(err))
			}
			if res.Changed {
				e.hub.Appended(req.SharedRunId, []*messages.LedgerEntry{res.Entry})
			}
			return
		}
		endRun(ctx, e, req, entry, messages.RunCancelled, reason)
		if err := e.st.ReleaseReservation(ctx, instanceID, req.SharedRunId); err != nil {
			e.log.Warn("release reservation", zap.Error(err))
		}
	})
}

// endRun gives req's run the terminal status with entry unless it is final already, and
// reports whether it did. A failure is logged.
func endRun(ctx context.Context, e *env, req *messages.DispatchRequest, entry *messages.LedgerEntry, status, reason string) bool {
	_, changed, err := e.finishRun(ctx, req.SharedRunId, entry, func(r *messages.SharedRun) bool {
		if messages.IsTerminalRun(r.Status) {
			return false
		}
		r.Status, r.FailureReason = status, reason
		return true
	})
	if err != nil {
		e.log.Warn("end run", zap.String("tenant_id", req.GetSnapshot().GetTenantId()), zap.String("shared_run_id", req.SharedRunId),
			zap.String("status", status), zap.Error(err))
	}
	return changed
}

func (in *instance) result(op string, ok bool, reason string) *messages.ProviderResult {
	return &messages.ProviderResult{Provider: in.providerName(), RuntimeInstanceId: in.spec.ID, Op: op, Ok: ok, Reason: reason,
		Retryable: !ok && !permanentReasons[reason]}
}

// providerName names the provider that reaches this instance.
func (in *instance) providerName() string {
	if p := in.spec.Transport.Provider; p != "" {
		return p
	}
	if in.env.cfg.Cluster != nil {
		return ActorProviderName
	}
	return local.Name
}

func (in *instance) transportName() string {
	if tr := in.spec.Transport; tr.Provider != "" {
		if tr.Name != "" {
			return tr.Name
		}
		return tr.Provider
	}
	if in.env.cfg.Cluster != nil {
		return "grpc"
	}
	return "in-memory"
}

// descriptor is the instance's capacity snapshot (the seed's capacity descriptor).
func (in *instance) descriptor(c actor.Context) *messages.CapacityDescriptor {
	t, e := in.spec.Settings, in.env
	d := &messages.CapacityDescriptor{
		RuntimeInstanceId: in.spec.ID, ControlPlaneId: e.cfg.ControlPlaneID, HostId: e.nodeID,
		ProviderName: in.providerName(), TransportName: in.transportName(), Endpoint: e.system.Address(),
		TenantId: t.TenantId, TenantGroupId: t.TenantGroupId, IsolationMode: t.IsolationMode,
		PreferDedicatedCapacity: t.PreferDedicatedCapacity, AllowSharedFallback: t.AllowSharedFallback,
		RuntimeInstanceIdPrefix: t.RuntimeInstanceIdPrefix, MaxRuntimeInstances: t.MaxRuntimeInstances,
		LastHeartbeatAt: e.now().UnixNano(), NodeId: e.incarnation, Address: e.system.Address(),
		ActorId: c.Self().Id, Roles: []string{"runtime"},
		Metadata: map[string]string{
			"provider.name": in.providerName(), "provider.transport": in.transportName(), "tenant.id": t.TenantId, "tenant.groupId": t.TenantGroupId,
			"isolation.mode": t.IsolationMode, "allow.shared.fallback": fmt.Sprint(t.AllowSharedFallback),
			"prefer.dedicated.capacity": fmt.Sprint(t.PreferDedicatedCapacity), "runtime.instance.id.prefix": t.RuntimeInstanceIdPrefix,
			"node.id": e.nodeID,
		},
	}
	if tr := in.spec.Transport; tr.Provider != "" {
		d.Endpoint = tr.Endpoint
		d.Metadata["provider.endpoint"] = tr.Endpoint
		for k, v := range tr.Metadata {
			d.Metadata[k] = v
		}
	}
	in.q.Fill(d)
	if in.spec.ScaleOutRequestID != "" {
		d.Metadata["scaleout.request.id"] = in.spec.ScaleOutRequestID
	}
	return d
}

// publish hands the current descriptor to the node's publisher, which writes the latest state
// of each instance to the store (after a dispatch, a finished run, a control operation).
func (in *instance) publish(c actor.Context) {
	in.env.pub.put(in.descriptor(c), nil)
}

// heartbeat is publish that also has the publisher extend the slot holds of every run the
// instance has. Only heartbeats do: a hold outlives several of them, and listing every hold at
// each dispatch and finished run cost a copy of the list per run and a refresh of every hold in
// the store per publication.
func (in *instance) heartbeat(c actor.Context) {
	in.env.pub.put(in.descriptor(c), in.q.Holds())
}

// permanentReasons are the refusals of an instance that a retry cannot change.
var permanentReasons = map[string]bool{"missing-execution-context": true, "tenant-not-visible": true, reasonInvalidDispatch: true,
	"unknown-op": true}

// reasonInvalidDispatch refuses a dispatch no pump sends: no run, no pipeline, a tenant id that
// is not one, a negative parallelism (a hand-made request to a host's transport). Taking it
// would hold a slot for a run no store has.
const reasonInvalidDispatch = "invalid-dispatch"

// invalidDispatch names what makes req a dispatch no pump sends, or returns "". It is pure.
func invalidDispatch(req *messages.DispatchRequest) string {
	switch {
	case req.SharedRunId == "":
		return "no shared_run_id"
	case req.PipelineKey == "":
		return "no pipeline_key"
	case req.MaxParallelism < 0:
		return fmt.Sprintf("max_parallelism %d is negative", req.MaxParallelism)
	}
	if err := tenancy.ValidateTenantID(req.GetSnapshot().GetTenantId()); err != nil {
		return err.Error()
	}
	return ""
}
