package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/localqueue"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// InstanceSpec describes a runtime instance to create: its id and the tenant settings of the
// scope it serves (capacity comes from the settings).
type InstanceSpec struct {
	ID                string
	Settings          *messages.TenantSettings
	ScaleOutRequestID string
	// Transport is how control planes reach the instance; the zero value means the node's
	// own transport (provider "local", or "actor" in a cluster).
	Transport InstanceTransport
}

// InstanceTransport is what an instance publishes about how it is reached: a process host
// serving HTTP, gRPC or a Redis command queue registers provider_name, transport_name and
// endpoint (seed 000's capacity descriptor) so the control plane's router resolves the
// matching provider.
type InstanceTransport struct {
	// Provider is the provider name ("http", "grpc", "redis-command-queue").
	Provider string
	// Name is the transport name (usually the provider name).
	Name string
	// Endpoint is where the transport reaches the instance (a URL, a stream key).
	Endpoint string
	// Metadata is added to the descriptor's metadata (provider.commandQueueKey, ...).
	Metadata map[string]string
}

// runEntry is a run of the instance that has an execution actor.
type runEntry struct {
	pid  *actor.PID
	seed *execSeed
}

// instance is a runtime instance: it owns a local queue of runs (RunId) and a worker budget
// (localqueue.Queue), the execution children, and its registry entry (self-registration,
// capacity and heartbeat through the node's publisher). It rejects a run without an
// ExecutionContextSnapshot and a run of a tenant that may not use it.
type instance struct {
	env   *env
	spec  InstanceSpec
	q     *localqueue.Queue
	execs map[string]*runEntry // by local run id, while running
	// byPID names the local run of each execution in execs by its actor's PID id, for the
	// Terminated of a child that stopped without reporting (a scan of execs per Terminated
	// made stopping an instance of 100,000 executions quadratic).
	byPID map[string]string
	// started are the local runs whose execution the dispatcher started with the assignment
	// (prestart.go), until they start here.
	started   map[string]*messages.Execution
	stopTick  func()
	restarted bool
	stopping  bool // the instance is stopping: its executions stop with it, not crash
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
	}, actor.WithSupervisor(executionSupervisor), actor.WithDispatcher(e.mailboxes))
}

type (
	heartbeatTick struct{}
	execGone      struct{ localRunID string }
)

func (in *instance) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		in.start(c)
	case *actor.Stopping:
		in.stopping = true
		in.endTicks()
	case *actor.Restarting:
		in.endTicks()
	case *actor.Stopped:
		in.env.dir.remove(in.spec.ID, c.Self())
		in.env.pub.remove(in.spec.ID)
		in.releaseHolds()
	case *heartbeatTick:
		in.heartbeat(c)
	case *messages.DispatchRequest:
		c.Respond(in.dispatch(c, m))
	case *runFinished:
		in.finished(c, m.localRunID, m.outcome, m.released)
	case *actor.Terminated:
		if lr, ok := in.byPID[m.Who.GetId()]; ok {
			c.Send(c.Self(), &execGone{localRunID: lr})
		}
	case *execGone:
		in.execGone(c, m.localRunID)
	case *messages.ControlRequest:
		c.Respond(in.control(c, m))
	case *messages.RunStatusRequest:
		c.Respond(in.runStatus(m))
	case *messages.QueueStatusRequest:
		c.Respond(&messages.QueueStatus{Capacity: in.descriptor(c), Result: in.result(providers.OpQueueStatus, true, ""),
			QueuedLocalRunIds: in.q.QueuedIDs(), RunningLocalRunIds: in.q.RunningIDs()})
	case *injectPanic:
		panic("dair: injected instance panic")
	case *injectExecPanic:
		lr, _ := in.q.Find("", m.sharedRunID)
		r := in.execs[lr]
		if r != nil {
			c.Send(r.pid, &injectPanic{})
		}
		c.Respond(r != nil)
	}
}

func (in *instance) endTicks() {
	if in.stopTick != nil {
		in.stopTick()
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
	in.q = localqueue.New(localqueue.Limits{Workers: int(t.WorkerCountPerInstance), MaxConcurrent: int(t.MaxConcurrentRunsPerInstance),
		QueueCapacity: int(t.LocalQueueCapacity), MaxLocal: int(t.MaxLocalWorkersPerExecution)})
	in.execs, in.byPID, in.started = map[string]*runEntry{}, map[string]string{}, map[string]*messages.Execution{}
	in.env.dir.put(in.spec.ID, c.Self())
	in.stopTick = in.env.tick(c.Self(), in.env.cfg.HeartbeatInterval, &heartbeatTick{})
	in.heartbeat(c)
	if in.restarted {
		in.rehydrate(c)
	}
}

func (in *instance) dispatch(c actor.Context, req *messages.DispatchRequest) *messages.ProviderResult {
	reason := ""
	switch {
	case req.Snapshot == nil || req.Snapshot.TenantId == "":
		reason = "missing-execution-context"
	case invalidDispatch(req) != "":
		reason = reasonInvalidDispatch
		in.env.log.Warn("dispatch refused", zap.String("runtime_instance_id", in.spec.ID), zap.String("problem", invalidDispatch(req)))
	case !in.allows(req.Snapshot):
		reason = "tenant-not-visible"
	}
	lr := ""
	if reason == "" {
		started := in.env.prestarts.take(req.ExecutionId)
		lr, reason = in.q.Offer(req, func() string {
			if started != nil {
				return started.LocalRunId
			}
			return ids.New("lrun")
		})
		if started != nil && reason == "" && lr == started.LocalRunId {
			in.started[lr] = started
		}
	}
	res := in.result(providers.OpDispatch, reason == "", reason)
	res.TenantId, res.CorrelationId, res.LocalRunId = req.GetSnapshot().GetTenantId(), req.CorrelationId, lr
	if reason == "" {
		in.startRuns(c)
		in.publish(c)
	}
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

// startRuns spawns an execution for every run the local queue lets start now.
func (in *instance) startRuns(c actor.Context) {
	for _, r := range in.q.Start() {
		seed := &execSeed{env: in.env, req: r.Req, localRunID: r.LocalRunID, instanceID: in.spec.ID, workers: r.Workers}
		if x := in.started[r.LocalRunID]; x != nil {
			// Its assignment wrote the start: the activation begins at epoch 1, marked.
			delete(in.started, r.LocalRunID)
			seed.executionID, seed.epoch, seed.marked, seed.started = x.ExecutionId, 1, true, x
		}
		pid := c.Spawn(newExecutionProps(seed))
		in.execs[r.LocalRunID] = &runEntry{pid: pid, seed: seed}
		in.byPID[pid.GetId()] = r.LocalRunID
	}
}

// finished frees the local slot of an execution that ended, and its slot hold in the store
// unless the execution's end released it (released).
func (in *instance) finished(c actor.Context, lr string, outcome execOutcome, released bool) {
	r, ok := in.q.Finish(lr)
	if !ok {
		return
	}
	if e := in.execs[lr]; e != nil {
		delete(in.byPID, e.pid.GetId())
		delete(in.execs, lr)
	}
	if outcome == execFenced && !in.stopping {
		in.resumeIfStillMine(c, r.Req.SharedRunId)
	}
	if !released {
		in.release(r.Req.SharedRunId)
	}
	in.startRuns(c)
	in.publish(c)
}

// execGone handles an execution that stopped without reporting: the supervisor gave up on a
// crashing execution, so its run fails, fenced by the execution's epoch so that a node that
// lost the run cannot touch it.
func (in *instance) execGone(c actor.Context, lr string) {
	r := in.execs[lr]
	if r == nil {
		return
	}
	if !in.stopping {
		in.env.log.Error("execution stopped by its supervisor", zap.String("tenant_id", r.seed.req.GetSnapshot().GetTenantId()),
			zap.String("shared_run_id", r.seed.req.SharedRunId))
		failExecution(in.env, r.seed, "execution-crashed")
	}
	in.finished(c, lr, execCrashed, r.seed.released)
}
