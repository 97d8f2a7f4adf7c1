package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// InstanceSpec describes a runtime instance to create: its id and the tenant settings of the
// scope it serves (capacity comes from the settings).
type InstanceSpec struct {
	ID                string
	Settings          *messages.TenantSettings
	ScaleOutRequestID string
}

type queuedRun struct {
	localRunID string
	req        *messages.DispatchRequest
}

type runEntry struct {
	localRunID string
	req        *messages.DispatchRequest
	pid        *actor.PID
	seed       *execSeed
	workers    int
	ended      bool
}

// instance is a runtime instance: it owns a local queue of runs (RunId), a worker budget, the
// execution children, and its registry entry (self-registration, capacity and heartbeat). It
// rejects a run without an ExecutionContextSnapshot and a run of a tenant that may not use it.
type instance struct {
	env  *env
	spec InstanceSpec

	workers, maxConcurrent, queueCap, maxLocal int

	queue         []*queuedRun
	running       map[string]*runEntry // by local run id
	byShared      map[string]string    // shared run id -> local run id
	activeWorkers int
	paused        bool
	draining      bool
	stopTimer     func()
	restarted     bool
	stopping      bool // the instance is stopping: its executions stop with it, not crash
}

// Supervisor strategy of an instance for its executions: restart a crashed execution (it
// rehydrates from the store) up to 5 times in 30 s; past that the execution is stopped and its
// run fails with reason "execution-crashed".
var executionSupervisor = actor.NewOneForOneStrategy(5, 30*time.Second, actor.DefaultDecider)

func newInstanceProps(e *env, spec InstanceSpec) *actor.Props {
	restarted := false
	return actor.PropsFromProducer(func() actor.Actor {
		in := &instance{env: e, spec: spec, restarted: restarted}
		restarted = true
		return in
	}, actor.WithSupervisor(executionSupervisor))
}

type heartbeatTick struct{}
type execGone struct{ localRunID string }

func (in *instance) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		in.start(c)
	case *actor.Stopping:
		in.stopping = true
		if in.stopTimer != nil {
			in.stopTimer()
		}
	case *actor.Stopped:
		in.env.dir.remove(in.spec.ID, c.Self())
		in.env.pub.remove(in.spec.ID)
		in.releaseHolds()
	case *actor.Restarting:
		if in.stopTimer != nil {
			in.stopTimer()
		}
	case *heartbeatTick:
		in.publish(c)
	case *messages.DispatchRequest:
		c.Respond(in.dispatch(c, m))
	case *runFinished:
		in.finished(c, m.localRunID, m.status)
	case *actor.Terminated:
		for lr, r := range in.running {
			if r.pid != nil && r.pid.Equal(m.Who) {
				c.Send(c.Self(), &execGone{localRunID: lr})
			}
		}
	case *execGone:
		if r := in.running[m.localRunID]; r != nil && !r.ended {
			if !in.stopping {
				// The supervisor gave up on a crashing execution: fail its run, fenced by the
				// execution's epoch so a node that lost the run cannot touch it.
				in.env.log.Error("execution stopped by its supervisor", zap.String("tenant_id", r.req.GetSnapshot().GetTenantId()),
					zap.String("shared_run_id", r.req.SharedRunId))
				failExecution(in.env, r.seed, "execution-crashed")
			}
			in.finished(c, m.localRunID, "crashed")
		}
	case *messages.ControlRequest:
		c.Respond(in.control(c, m))
	case *messages.RunStatusRequest:
		c.Respond(in.runStatus(m))
	case *messages.QueueStatusRequest:
		q := &messages.QueueStatus{Capacity: in.descriptor(c), Result: in.result("queue-status", true, "")}
		for _, r := range in.queue {
			q.QueuedLocalRunIds = append(q.QueuedLocalRunIds, r.localRunID)
		}
		for lr := range in.running {
			q.RunningLocalRunIds = append(q.RunningLocalRunIds, lr)
		}
		c.Respond(q)
	case *InjectPanic:
		panic("dair: injected instance panic")
	case *injectExecPanic:
		lr, ok := in.byShared[m.sharedRunID]
		r := in.running[lr]
		if ok && r != nil {
			c.Send(r.pid, &InjectPanic{})
		}
		c.Respond(ok && r != nil)
	}
}

func (in *instance) start(c actor.Context) {
	t := tenancy.Normalize(in.spec.Settings)
	if t.IsolationMode == messages.IsolationShared {
		// Shared capacity belongs to no tenant: the tenant whose run caused the scale-out must
		// not be named on it (other tenants list it).
		t.TenantId, t.TenantGroupId = "", ""
	}
	in.spec.Settings = t
	in.workers = int(t.WorkerCountPerInstance)
	in.maxConcurrent = int(t.MaxConcurrentRunsPerInstance)
	in.queueCap = int(t.LocalQueueCapacity)
	in.maxLocal = int(t.MaxLocalWorkersPerExecution)
	if in.maxLocal <= 0 || in.maxLocal >= in.workers {
		// Without an explicit per-execution cap, split the workers among the run slots so that
		// every slot can start (seed: MaxLocalWorkersPerExecution is a local policy).
		in.maxLocal = max(1, in.workers/max(1, in.maxConcurrent))
	}
	in.running = map[string]*runEntry{}
	in.byShared = map[string]string{}
	in.env.dir.put(in.spec.ID, c.Self())
	in.stopTimer = tickTo(in.env.system, c.Self(), in.env.cfg.HeartbeatInterval, &heartbeatTick{})
	in.publish(c)
	if in.restarted {
		in.rehydrate(c)
	}
}

// rehydrate runs after a supervisor restart of the instance: its executions were stopped with
// the old incarnation, so each non-terminal execution it owned is re-dispatched to itself.
func (in *instance) rehydrate(c actor.Context) {
	e, id, self := in.env, in.spec.ID, c.Self()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
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
	}()
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
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
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
	}()
}

func (in *instance) result(op string, ok bool, reason string) *messages.ProviderResult {
	return &messages.ProviderResult{Provider: in.providerName(), RuntimeInstanceId: in.spec.ID, Op: op, Ok: ok, Reason: reason,
		Retryable: !ok && reason != "missing-execution-context" && reason != "tenant-not-visible"}
}

func (in *instance) dispatch(c actor.Context, req *messages.DispatchRequest) *messages.ProviderResult {
	res := in.result("dispatch", true, "")
	res.TenantId, res.CorrelationId = req.GetSnapshot().GetTenantId(), req.CorrelationId
	fail := func(reason string) *messages.ProviderResult {
		r := in.result("dispatch", false, reason)
		r.TenantId, r.CorrelationId = res.TenantId, res.CorrelationId
		return r
	}
	if req.Snapshot == nil || req.Snapshot.TenantId == "" {
		return fail("missing-execution-context")
	}
	if !in.allows(req.Snapshot) {
		return fail("tenant-not-visible")
	}
	if lr, ok := in.byShared[req.SharedRunId]; ok {
		res.LocalRunId = lr
		return res
	}
	if in.draining {
		return fail("instance-draining")
	}
	if in.paused {
		return fail("queue-paused")
	}
	canStart := len(in.queue) == 0 && len(in.running) < in.maxConcurrent && in.workers-in.activeWorkers > 0
	if !canStart && len(in.queue) >= in.queueCap {
		return fail("queue-full")
	}
	lr := ids.New("lrun")
	in.queue = append(in.queue, &queuedRun{localRunID: lr, req: req})
	in.byShared[req.SharedRunId] = lr
	res.LocalRunId = lr
	in.tryStart(c)
	in.publish(c)
	return res
}

// allows is the instance's own tenant check (defence in depth behind admission): a dedicated
// or hybrid instance serves only its tenant or tenant group; a shared instance serves anyone
// admission sent (shared tenants, and fallback tenants whose settings allow it).
func (in *instance) allows(s *messages.ExecutionContextSnapshot) bool {
	t := in.spec.Settings
	if t.IsolationMode == messages.IsolationShared || t.IsolationMode == "" {
		return true
	}
	return s.TenantId == t.TenantId || (t.TenantGroupId != "" && s.TenantGroupId == t.TenantGroupId)
}

func (in *instance) tryStart(c actor.Context) {
	for !in.paused && len(in.queue) > 0 && len(in.running) < in.maxConcurrent {
		avail := in.workers - in.activeWorkers
		if avail <= 0 {
			return
		}
		q := in.queue[0]
		in.queue = in.queue[1:]
		perExec := in.maxLocal
		if p := int(q.req.MaxParallelism); p > 0 && p < perExec {
			perExec = p // the pipeline can never use more workers than its widest level
		}
		w := tenancy.EffectiveWorkers(in.workers, perExec, avail)
		in.activeWorkers += w
		seed := &execSeed{env: in.env, req: q.req, localRunID: q.localRunID, instanceID: in.spec.ID, workers: w}
		pid := c.Spawn(newExecutionProps(seed))
		in.running[q.localRunID] = &runEntry{localRunID: q.localRunID, req: q.req, pid: pid, seed: seed, workers: w}
	}
}

func (in *instance) finished(c actor.Context, lr, status string) {
	r := in.running[lr]
	if r == nil || r.ended {
		return
	}
	r.ended = true
	delete(in.running, lr)
	delete(in.byShared, r.req.SharedRunId)
	in.activeWorkers -= r.workers
	if status == "fenced" && !in.stopping {
		in.resumeIfStillMine(c, r.req.SharedRunId)
	}
	e, id, runID := in.env, in.spec.ID, r.req.SharedRunId
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.st.ReleaseReservation(ctx, id, runID); err != nil {
			e.log.Warn("release reservation", zap.String("runtime_instance_id", id), zap.Error(err))
		}
	}()
	in.tryStart(c)
	in.publish(c)
}

// releaseHolds drops the slot reservations of the runs a stopped instance still tracks (an
// execution that finished as the instance stopped could not report, so its hold would outlive
// the instance and keep the id from being reused until it lapsed). A node declared dead
// leaves them to recovery: its runs, and maybe its instance ids, already belong to others.
func (in *instance) releaseHolds() {
	if in.env.dead.Load() || len(in.byShared) == 0 {
		return
	}
	e, id := in.env, in.spec.ID
	runs := make([]string, 0, len(in.byShared))
	for runID := range in.byShared {
		runs = append(runs, runID)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, runID := range runs {
			if err := e.st.ReleaseReservation(ctx, id, runID); err != nil {
				e.log.Warn("release reservation of a stopped instance", zap.String("runtime_instance_id", id), zap.Error(err))
				return
			}
		}
	}()
}

// failExecution fails an execution that cannot go on (its actor was given up on), and its run,
// only while the execution's epoch is still the one this instance acquired.
func failExecution(e *env, seed *execSeed, reason string) {
	execID, epoch, req, instanceID := seed.executionID, seed.epoch, seed.req, seed.instanceID
	if execID == "" || epoch == 0 {
		return // never started: recovery requeues the run
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := e.st.UpdateExecution(ctx, execID, epoch, func(ex *messages.Execution) error {
			ex.Status, ex.FailureReason = messages.RunFailed, reason
			return nil
		}); err != nil {
			e.log.Warn("fail execution", zap.String("execution_id", execID), zap.Error(err))
			return
		}
		entry := &messages.LedgerEntry{Kind: messages.KindRunFailed, SharedRunId: req.SharedRunId,
			RuntimeInstanceId: instanceID, Reason: reason, TenantId: req.GetSnapshot().GetTenantId()}
		_, changed, err := e.finishRun(ctx, req.SharedRunId, entry, func(r *messages.SharedRun) bool {
			if messages.IsTerminalRun(r.Status) {
				return false
			}
			r.Status, r.FailureReason = messages.RunFailed, reason
			return true
		})
		if err != nil {
			e.log.Warn("fail run", zap.String("tenant_id", req.GetSnapshot().GetTenantId()), zap.String("shared_run_id", req.SharedRunId), zap.Error(err))
			return
		}
		if changed {
			e.metrics.runFinished(messages.RunFailed)
		}
	}()
}

func (in *instance) find(localRunID, sharedRunID string) (string, bool) {
	if localRunID != "" {
		return localRunID, true
	}
	lr, ok := in.byShared[sharedRunID]
	return lr, ok
}

func (in *instance) control(c actor.Context, m *messages.ControlRequest) *messages.ProviderResult {
	switch m.Op {
	case "pause_queue":
		in.paused = true
	case "resume_queue":
		in.paused, in.draining = false, false // resume returns a paused or draining instance to service
		in.tryStart(c)
	case "drain_queue":
		in.draining = true
	case "undrain_queue":
		in.draining = false
	case "cancel_run", "pause_run", "resume_run":
		lr, ok := in.find(m.LocalRunId, m.SharedRunId)
		if !ok {
			return in.result(m.Op, false, "run-not-found")
		}
		if r := in.running[lr]; r != nil {
			var msg any = &pauseRun{}
			switch m.Op {
			case "cancel_run":
				msg = &cancelRun{reason: m.Reason}
			case "resume_run":
				msg = &resumeRun{}
			}
			c.Send(r.pid, msg)
			break
		}
		for i, q := range in.queue {
			if q.localRunID != lr {
				continue
			}
			if m.Op != "cancel_run" {
				return in.result(m.Op, false, "run-not-started")
			}
			in.queue = append(in.queue[:i], in.queue[i+1:]...)
			delete(in.byShared, q.req.SharedRunId)
			cancelQueued(in.env, q.req, in.spec.ID, m.Reason)
			break
		}
	case "stop_instance":
		in.stopping = true
		c.Stop(c.Self())
		return in.result(m.Op, true, "")
	default:
		return in.result(m.Op, false, "unknown-op")
	}
	in.publish(c)
	return in.result(m.Op, true, "")
}

func cancelQueued(e *env, req *messages.DispatchRequest, instanceID, reason string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if reason == "" {
			reason = "cancelled"
		}
		entry := &messages.LedgerEntry{Kind: messages.KindRunCancelled, SharedRunId: req.SharedRunId, RuntimeInstanceId: instanceID,
			Reason: reason, TenantId: req.GetSnapshot().GetTenantId()}
		if _, _, err := e.finishRun(ctx, req.SharedRunId, entry, func(r *messages.SharedRun) bool {
			if messages.IsTerminalRun(r.Status) {
				return false
			}
			r.Status, r.FailureReason = messages.RunCancelled, reason
			return true
		}); err != nil {
			e.log.Warn("cancel queued run", zap.String("shared_run_id", req.SharedRunId), zap.Error(err))
		}
		if err := e.st.ReleaseReservation(ctx, instanceID, req.SharedRunId); err != nil {
			e.log.Warn("release reservation", zap.Error(err))
		}
	}()
}

func (in *instance) runStatus(m *messages.RunStatusRequest) *messages.RunStatus {
	if r := in.running[m.LocalRunId]; r != nil {
		return &messages.RunStatus{LocalRunId: m.LocalRunId, SharedRunId: r.req.SharedRunId, Status: messages.RunRunning, Result: in.result("run-status", true, "")}
	}
	for _, q := range in.queue {
		if q.localRunID == m.LocalRunId {
			return &messages.RunStatus{LocalRunId: m.LocalRunId, SharedRunId: q.req.SharedRunId, Status: messages.RunQueued, Result: in.result("run-status", true, "")}
		}
	}
	return &messages.RunStatus{LocalRunId: m.LocalRunId, Result: in.result("run-status", false, "run-not-found")}
}

// descriptor is the instance's capacity snapshot (the seed's capacity descriptor).
func (in *instance) descriptor(c actor.Context) *messages.CapacityDescriptor {
	t := in.spec.Settings
	slots := max(0, in.maxConcurrent-len(in.running))
	avail := max(0, in.workers-in.activeWorkers)
	status := messages.InstanceReady
	if in.draining {
		status = messages.InstanceDraining
	}
	d := &messages.CapacityDescriptor{
		RuntimeInstanceId: in.spec.ID, ControlPlaneId: in.env.cfg.ControlPlaneID, HostId: in.env.nodeID,
		ProviderName: in.providerName(), TransportName: in.transportName(), Endpoint: in.env.system.Address(), Status: status,
		WorkerCount: int32(in.workers), ActiveWorkerCount: int32(in.activeWorkers), AvailableWorkerCount: int32(avail),
		MaxLocalWorkersPerExecution: int32(in.maxLocal), QueuedRunCount: int32(len(in.queue)), RunningRunCount: int32(len(in.running)),
		ActiveRunCount: int32(len(in.queue) + len(in.running)), QueueCapacity: int32(in.queueCap), MaxConcurrentRuns: int32(in.maxConcurrent),
		AvailableRunSlots: int32(slots), IsQueuePaused: in.paused, IsDraining: in.draining,
		CanAcceptRun: !in.paused && !in.draining && len(in.queue) < in.queueCap && slots > 0 && avail > 0,
		TenantId:     t.TenantId, TenantGroupId: t.TenantGroupId, IsolationMode: t.IsolationMode,
		PreferDedicatedCapacity: t.PreferDedicatedCapacity, AllowSharedFallback: t.AllowSharedFallback,
		RuntimeInstanceIdPrefix: t.RuntimeInstanceIdPrefix, MaxRuntimeInstances: t.MaxRuntimeInstances,
		LastHeartbeatAt: in.env.now().UnixNano(), NodeId: in.env.incarnation, Address: in.env.system.Address(),
		ActorId: c.Self().Id, Roles: []string{"runtime"},
		Metadata: map[string]string{
			"provider.name": in.providerName(), "provider.transport": in.transportName(), "tenant.id": t.TenantId, "tenant.groupId": t.TenantGroupId,
			"isolation.mode": t.IsolationMode, "allow.shared.fallback": fmt.Sprint(t.AllowSharedFallback),
			"prefer.dedicated.capacity": fmt.Sprint(t.PreferDedicatedCapacity), "runtime.instance.id.prefix": t.RuntimeInstanceIdPrefix,
			"node.id": in.env.nodeID,
		},
	}
	if in.spec.ScaleOutRequestID != "" {
		d.Metadata["scaleout.request.id"] = in.spec.ScaleOutRequestID
	}
	return d
}

// publish hands the current descriptor and the held reservations to the node's publisher,
// which writes the latest state of each instance to the store.
func (in *instance) publish(c actor.Context) {
	runs := make([]string, 0, len(in.running)+len(in.queue))
	for _, r := range in.running {
		runs = append(runs, r.req.SharedRunId)
	}
	for _, q := range in.queue {
		runs = append(runs, q.req.SharedRunId)
	}
	in.env.pub.put(in.descriptor(c), runs)
}
