package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// Local messages of the agent runtime (never sent to another node).
type (
	// agentLocalSend asks this node's worker to deliver env; the outcome goes to done.
	// deliver, when set, is the checked delivery to forward.
	agentLocalSend struct {
		env     *messages.MessageEnvelope
		tenant  string
		done    chan<- *messages.DeliveryOutcome
		deliver *agentDeliver
	}
	// agentRouteSend asks this node's router to deliver env under a session; it is queued in
	// the runtime's sends intake, announced by agentSendsQueued.
	agentRouteSend struct {
		env    *messages.MessageEnvelope
		tenant string
		done   chan<- *messages.DeliveryOutcome
	}
	// agentSendsQueued tells the router that sends are queued in the runtime's intake.
	agentSendsQueued struct{}
	// agentResultsQueued tells the worker that outcomes of remote sends are queued in the
	// runtime's results intake.
	agentResultsQueued struct{}
	// agentPublishCall asks this node's router to publish env.
	agentPublishCall struct {
		env    *messages.MessageEnvelope
		tenant string
		done   chan<- publishResult
	}
	publishResult struct {
		deliveries int
		err        error
	}
	agentTickMsg       struct{}
	agentHealthTickMsg struct{}
	agentSweepMsg      struct{}
	agentMembersMsg    struct{ members []agents.Member }
	agentEndpointDown  struct{ address string }
	// agentStopRouting makes the router refuse new work and fail its pending sessions.
	agentStopRouting struct{}
	// agentDirectoryReq asks the router for its view (answered with *AgentDirectory).
	agentDirectoryReq struct{}
	// agentDrain asks the worker to answer once every agent handled what it had queued.
	agentDrain struct{}
	// agentActiveReq asks the worker for its number of active agents (answered with int).
	agentActiveReq struct{}
)

// drainPoll is how often Stop checks whether the facade calls in progress are done.
const drainPoll = 2 * time.Millisecond

// send routes env by the published table: to this node's worker directly when it owns the
// agent, through the router (and its session table) otherwise.
func (rt *agentRuntime) send(ctx context.Context, env *messages.MessageEnvelope) (*messages.DeliveryOutcome, error) {
	if rt == nil {
		return nil, ErrAgentsStopped
	}
	rt.inflight.Add(1)
	defer rt.inflight.Add(-1)
	if !rt.accepting.Load() {
		return agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s is stopping", rt.nodeID), ""), nil
	}
	deadline := rt.deadline(ctx, env)
	tenant := env.GetSnapshot().GetTenantId()
	route := rt.table.Load().Route(tenant, env.Recipient)
	if route.Worker == nil {
		return agents.Undeliverable(route.Reason, ""), nil
	}
	done := outcomeChans.Get().(chan *messages.DeliveryOutcome)
	if route.Worker.Self {
		spec, refused := rt.check(env, tenant)
		if refused != nil {
			outcomeChans.Put(done)
			return refused, nil
		}
		d := &agentDeliver{env: env, tenant: tenant, spec: spec, done: done}
		if slot := rt.slots.get(agents.KeyOf(tenant, env.Recipient)); slot != nil && slot.acquire() {
			if rt.deliverActive(slot, d, deadline) {
				<-done // the handler outlived the deadline: its answer is late, as it would be for a waiting caller
				outcomeChans.Put(done)
				return agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "agent %s/%s answered after the deadline",
					env.Recipient.Type, env.Recipient.Key), rt.selfID), nil
			}
		} else {
			rt.system.Root.Send(rt.worker, &agentLocalSend{env: env, tenant: tenant, done: done, deliver: d})
		}
	} else {
		defer rt.endRemote(rt.sendRemote(env, tenant, done, route.Worker)) // sent now, ended on return
	}
	return rt.await(ctx, env, done, deadline, route.Worker.ID)
}

// deliverActive hands d to the active agent of slot, past the worker: on the caller's goroutine
// when the agent is idle (agentMailbox.postInline), unless its type runs on its own goroutine.
// It reports whether the handler ran here and answered after deadline.
func (rt *agentRuntime) deliverActive(slot *agentSlot, d *agentDeliver, deadline time.Time) (late bool) {
	if d.spec.ownGoroutine {
		slot.mailbox.PostUserMessage(d)
		return false
	}
	if !slot.mailbox.postInline(d) {
		return false
	}
	rt.inlineRuns.Add(1)
	return !time.Now().Before(deadline)
}

// deadline returns when the caller of env stops waiting: env's deadline, else the RPC timeout
// from now, bounded by ctx's; env.Deadline is set to it.
func (rt *agentRuntime) deadline(ctx context.Context, env *messages.MessageEnvelope) time.Time {
	var def time.Time
	if env.Deadline == 0 {
		def = time.Now().Add(rt.cfg.RPCTimeout)
	}
	return deadlineOf(ctx, env, def)
}

// deadlineOf is deadline with def as the deadline of an envelope without one.
func deadlineOf(ctx context.Context, env *messages.MessageEnvelope, def time.Time) time.Time {
	deadline := def
	if env.Deadline != 0 {
		deadline = time.Unix(0, env.Deadline)
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	env.Deadline = deadline.UnixNano()
	return deadline
}

// await waits for the outcome of env on done until deadline, on the deadline wheel's channel
// (a timer only when its tick was being closed), ctx or the runtime's stop (which wakes the
// wheel's waiters: a wait on rt.stopped too would lock that channel, shared by every waiter, on
// every send).
func (rt *agentRuntime) await(ctx context.Context, env *messages.MessageEnvelope, done chan *messages.DeliveryOutcome,
	deadline time.Time, worker string) (*messages.DeliveryOutcome, error) {
	var fallback <-chan time.Time
	wake := rt.deadlines.wait(deadline)
	for {
		if wake == nil && fallback == nil {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			fallback = t.C
		}
		select {
		case o := <-done:
			outcomeChans.Put(done) // drained, and nothing else holds it: reusable
			return o, nil
		case <-wake:
			if rt.deadlines.stopped.Load() {
				return agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s stopped", rt.nodeID), worker), nil
			}
			if time.Now().Before(deadline) { // a deadline beyond the wheel's horizon
				wake = rt.deadlines.wait(deadline)
				continue
			}
		case <-fallback:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "the caller's context ended"), worker), nil
			}
			return nil, ctx.Err()
		}
		return agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "no reply from agent %s/%s before the deadline",
			env.Recipient.Type, env.Recipient.Key), worker), nil
	}
}

// outcomeChans recycles the per-send reply channels. A channel goes back only once its one
// outcome was received, so a late answer never lands in a reused one.
var outcomeChans = sync.Pool{New: func() any { return make(chan *messages.DeliveryOutcome, 1) }}

// publish hands env to the router and waits for the workers' acknowledgements.
func (rt *agentRuntime) publish(ctx context.Context, env *messages.MessageEnvelope) (int, error) {
	if rt == nil {
		return 0, ErrAgentsStopped
	}
	rt.inflight.Add(1)
	defer rt.inflight.Add(-1)
	if !rt.accepting.Load() {
		return 0, ErrAgentsStopped
	}
	tenant, err := agents.TenantOf(env)
	if err != nil {
		return 0, fmt.Errorf("actors: publish: %w", err)
	}
	done := make(chan publishResult, 1)
	rt.system.Root.Send(rt.router, &agentPublishCall{env: env, tenant: tenant, done: done})
	select {
	case r := <-done:
		return r.deliveries, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-rt.stopped:
		return 0, ErrAgentsStopped
	}
}

// directory asks the router for its view and the worker for its active agents.
func (rt *agentRuntime) directory(ctx context.Context) (*AgentDirectory, error) {
	if rt == nil {
		return nil, ErrAgentsStopped
	}
	timeout := rt.cfg.RPCTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := rt.system.Root.RequestFuture(rt.router, agentDirectoryReq{}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("actors: agent directory: %w", err)
	}
	d, ok := res.(*AgentDirectory)
	if !ok {
		return nil, fmt.Errorf("actors: agent directory: unexpected answer %T", res)
	}
	if res, err := rt.system.Root.RequestFuture(rt.worker, agentActiveReq{}, timeout).Result(); err == nil {
		for i := range d.Workers {
			if d.Workers[i].Self {
				d.Workers[i].ActiveAgents, _ = res.(int)
			}
		}
	}
	return d, nil
}

// idle reports whether no facade call is in progress and the router has no pending session.
func (rt *agentRuntime) idle(ctx context.Context) bool {
	if rt.inflight.Load() > 0 {
		return false
	}
	d, err := rt.directory(ctx)
	return err == nil && d.PendingSessions == 0
}

// stopAgents shuts the agent runtime down in order: stop taking new work (the facade refuses,
// the other routers are told this worker is leaving and its types leave the node meta), drain
// (wait for the calls in progress, then for every agent to handle what it had queued) until ctx
// ends, fail what is still pending, and stop the actors last. It is idempotent; a nil runtime
// is a no-op.
func (n *Node) stopAgents(ctx context.Context) {
	rt := n.agents
	if rt == nil {
		return
	}
	rt.stopOnce.Do(func() { rt.stop(ctx) })
}

func (rt *agentRuntime) stop(ctx context.Context) {
	rt.catMu.Lock()
	old := rt.catalog.Load()
	next := *old
	next.version, next.leaving = old.version+1, true
	rt.setCatalogLocked(&next)
	rt.accepting.Store(false)
	rt.catMu.Unlock()
	if ctx.Err() == nil {
		if err := rt.announce(ctx); err != nil {
			rt.log.Warn("announce the agent worker's departure", zap.Error(err))
		}
	}
	for !rt.idle(ctx) && ctx.Err() == nil {
		t := time.NewTimer(drainPoll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if dl, ok := ctx.Deadline(); ctx.Err() == nil && (!ok || time.Until(dl) > 0) {
		wait := rt.cfg.RPCTimeout
		if ok {
			wait = time.Until(dl)
		}
		if _, err := rt.system.Root.RequestFuture(rt.worker, agentDrain{}, wait).Result(); err != nil {
			rt.log.Warn("drain the agents", zap.Error(err))
		}
	}
	if _, err := rt.system.Root.RequestFuture(rt.router, agentStopRouting{}, time.Second).Result(); err != nil {
		rt.log.Warn("stop the agent router", zap.Error(err))
	}
	close(rt.stopped)
	rt.deadlines.stop()
	rt.failBatches()
	// The handlers get a second to return after their contexts are cancelled, whether or not
	// the drain used up ctx (the node's own stop bounds the whole stop the same way).
	lifeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	if err := rt.life.Stop(lifeCtx); err != nil { // cancels the handlers still running
		rt.log.Warn("stop the agent handlers", zap.Error(err))
	}
	cancel()
	for _, stop := range rt.stopTicks {
		stop()
	}
	if err := rt.system.Root.StopFuture(rt.sup).Wait(); err != nil {
		rt.log.Warn("stop the agent runtime", zap.Error(err))
	}
	// The mailbox goroutines run in the node's worker group: Node.Stop cancels and waits for
	// them after this, with the rest of the node's background work.
}

// agentSupervisor is the parent of a node's agent worker and router.
type agentSupervisor struct {
	rt      *agentRuntime
	started chan<- [2]*actor.PID
}

func (s *agentSupervisor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); !ok {
		return
	}
	worker, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newAgentWorker(s.rt) },
		actor.WithSupervisor(agentSupervision), actor.WithDispatcher(s.rt.dispatcher)), "worker")
	if err != nil {
		s.rt.log.Error("spawn agent worker", zap.Error(err))
		return
	}
	router, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newAgentRouter(s.rt, worker) },
		actor.WithDispatcher(s.rt.dispatcher)), "router")
	if err != nil {
		s.rt.log.Error("spawn agent router", zap.Error(err))
		return
	}
	select {
	case s.started <- [2]*actor.PID{worker, router}:
	default: // a restart of the supervisor: the runtime already has the PIDs (same names)
	}
}

// agentSupervision is the worker's strategy for its agents: restart a failed agent (its
// handler's panics are recovered in place, so only runtime faults get here).
var agentSupervision = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)
