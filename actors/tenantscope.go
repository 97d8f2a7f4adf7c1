package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// scopeTimeout bounds one tenant scope actor round trip and its inline store I/O.
const scopeTimeout = 5 * time.Second

// SweepReport is the outcome of one idle sweep (Node.SweepTenants).
type SweepReport struct {
	// ScaledToZero lists the scopes (lifecycle.ScopeKey) scaled to zero by this sweep.
	ScaledToZero []string
	// Stopped lists the runtime instances stopped (scale to zero or scale in).
	Stopped []string
}

// tenantLifecycle is the node's side of the per-tenant runtime lifecycle (seed 001): the
// admission hook of Submit (EnsureReady, last-seen, cold start), the idle and weekly sweeps,
// suspension and live MaxRuntimeInstances. The tenant supervisor registers itself here when
// the control plane starts; without it (a runtime-only node) every hook is a no-op.
//
// Its methods are goroutine-safe and block on store I/O and, for a cold start, on capacity.
type tenantLifecycle struct {
	n   *Node
	cfg lifecycle.Config

	mu  sync.Mutex // guards sup
	sup *actor.PID
}

func newTenantLifecycle(n *Node, cfg lifecycle.Config) *tenantLifecycle {
	return &tenantLifecycle{n: n, cfg: cfg.WithDefaults()}
}

func (lc *tenantLifecycle) setSupervisor(pid *actor.PID) {
	lc.mu.Lock()
	lc.sup = pid
	lc.mu.Unlock()
}

// clearSupervisor forgets pid unless a newer supervisor registered meanwhile.
func (lc *tenantLifecycle) clearSupervisor(pid *actor.PID) {
	lc.mu.Lock()
	if lc.sup != nil && lc.sup.Equal(pid) {
		lc.sup = nil
	}
	lc.mu.Unlock()
}

func (lc *tenantLifecycle) supervisor() *actor.PID {
	if lc == nil {
		return nil
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.sup
}

// ask sends msg to the scope actor of key (spawned on demand) and returns its answer.
func (lc *tenantLifecycle) ask(key string, msg any) (any, error) {
	sup := lc.supervisor()
	if sup == nil {
		return nil, errors.New("actors: no tenant supervisor on this node")
	}
	res, err := lc.n.env.system.Root.RequestFuture(sup, &scopeEnvelope{key: key, msg: msg}, scopeTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("tenant scope %s: %w", key, err)
	}
	return res, nil
}

// state asks the scope actor of key for its state (the caller owns the copy).
func (lc *tenantLifecycle) state(key string, msg any) (*messages.TenantState, error) {
	res, err := lc.ask(key, msg)
	if err != nil {
		return nil, err
	}
	st, ok := res.(*messages.TenantState)
	if !ok {
		return nil, fmt.Errorf("tenant scope %s: unexpected answer %T", key, res)
	}
	return st, nil
}

// admit is Submit's lifecycle hook for tenant settings t (normalized, not suspended): it
// touches the scope (last seen), marks a first request ensured and, when the scope is at zero,
// cold-starts it: request capacity, wait up to ColdStartWait for a ready instance, retry
// ColdStartRetries times, then fail with ErrNoCapacity. The first request's capacity is
// scheduled by admission (RequestScaleOut parks the run on it), so admit does not wait for it.
func (lc *tenantLifecycle) admit(ctx context.Context, t *messages.TenantSettings) error {
	if lc.supervisor() == nil {
		return nil
	}
	key := lifecycle.ScopeKey(t)
	st, err := lc.state(key, &ensureReady{at: lc.n.env.now()})
	if err != nil {
		return err
	}
	if st.ScaledToZeroAt == 0 && st.EnsuredAt != 0 && !t.Suspended {
		return nil // the hot path: a scope that is up needs no registry read
	}
	live, err := lc.live(ctx, t)
	if err != nil {
		return err
	}
	switch lifecycle.Admit(lifecycle.Scope{State: st, Suspended: t.Suspended, Live: len(live)}) {
	case lifecycle.Reject:
		return fmt.Errorf("%w: %s", ErrTenantSuspended, t.TenantId)
	case lifecycle.ColdStart:
		return lc.coldStart(ctx, t, key)
	default: // Proceed, EnsureReady
		_, err := lc.ask(key, &scopeUp{at: lc.n.env.now()})
		return err
	}
}

// coldStart asks for capacity in t's scope and waits for a ready instance, attempt by attempt.
func (lc *tenantLifecycle) coldStart(ctx context.Context, t *messages.TenantSettings, key string) error {
	e := lc.n.env
	attempts := lc.cfg.ColdStartAttempts()
	for try := 1; try <= attempts; try++ {
		e.metrics.admission("cold_start", fmt.Sprintf("attempt-%d", try))
		if err := lc.requestCapacity(ctx, t); err != nil {
			return err
		}
		live, err := lc.waitLive(ctx, t, lc.cfg.ColdStartWait)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			if err := lc.recordLive(ctx, key, live); err != nil {
				return err
			}
			_, err := lc.ask(key, &scopeUp{at: e.now()})
			return err
		}
		e.log.Warn("cold start: no capacity in time", zap.String("tenant_id", t.TenantId), zap.Int("attempt", try),
			zap.Duration("wait", lc.cfg.ColdStartWait))
	}
	return fmt.Errorf("%w: tenant %s: no ready capacity within %s (%d attempts)", ErrNoCapacity, t.TenantId,
		lc.cfg.ColdStartWait, attempts)
}

// requestCapacity stores a durable scale-out request for t's scope and wakes the scale-out
// supervisor, which fulfils it through the configured scale-out provider.
func (lc *tenantLifecycle) requestCapacity(ctx context.Context, t *messages.TenantSettings) error {
	e, c := lc.n.env, lc.n.core
	now := e.now().UnixNano()
	req := &messages.ScaleOutRequest{RequestId: ids.New("scaleout"), Settings: t, ControlPlaneId: e.cfg.ControlPlaneID,
		ProviderHint: e.cfg.ScaleOutProvider, Status: messages.ScaleOutPending, CreatedAt: now, UpdatedAt: now,
		CorrelationId: "cold-start-" + t.TenantId}
	if err := e.st.CreateScaleOut(ctx, req); err != nil {
		return fmt.Errorf("create cold-start scale-out: %w", err)
	}
	if c.scaleOutCreated != nil {
		c.scaleOutCreated(req.RequestId)
	}
	return nil
}

// waitLive polls the registry until t's scope has a ready instance or wait elapses.
func (lc *tenantLifecycle) waitLive(ctx context.Context, t *messages.TenantSettings, wait time.Duration) ([]*messages.CapacityDescriptor, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		live, err := lc.live(ctx, t)
		if err == nil && len(live) > 0 {
			return live, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, nil
		case <-tick.C:
		}
	}
}

// live returns the ready, non-draining instances of t's scope.
func (lc *tenantLifecycle) live(ctx context.Context, t *messages.TenantSettings) ([]*messages.CapacityDescriptor, error) {
	insts, err := lc.n.env.st.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	var out []*messages.CapacityDescriptor
	for _, d := range inScope(insts, t) {
		if d.Status == messages.InstanceReady && !d.IsDraining {
			out = append(out, d)
		}
	}
	return out, nil
}

// inScope returns the instances of insts in t's scope that are not stopped.
func inScope(insts []*messages.CapacityDescriptor, t *messages.TenantSettings) []*messages.CapacityDescriptor {
	var out []*messages.CapacityDescriptor
	for _, d := range insts {
		if d.Status != messages.InstanceStopped && tenancy.InScope(d, t) {
			out = append(out, d)
		}
	}
	return out
}

// recordLive makes sure every live instance of scope key has a record at one replica.
func (lc *tenantLifecycle) recordLive(ctx context.Context, key string, live []*messages.CapacityDescriptor) error {
	st := lc.n.env.st
	for _, d := range live {
		r, err := st.GetInstanceRecord(ctx, d.RuntimeInstanceId)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("load instance record: %w", err)
		}
		if r != nil && r.Replicas == 1 && r.TenantId == key {
			continue
		}
		rec := &messages.InstanceRecord{RuntimeInstanceId: d.RuntimeInstanceId, TenantId: key, TenantGroupId: d.TenantGroupId,
			Prefix: d.RuntimeInstanceIdPrefix, Replicas: 1, Settings: settingsOf(d)}
		if r != nil && r.TenantId == key {
			rec.CreatedAt = r.CreatedAt
		}
		if err := st.PutInstanceRecord(ctx, rec); err != nil {
			return fmt.Errorf("record instance: %w", err)
		}
	}
	return nil
}

// settingsOf rebuilds the scope settings an instance was created with from its descriptor.
func settingsOf(d *messages.CapacityDescriptor) *messages.TenantSettings {
	return &messages.TenantSettings{TenantId: d.TenantId, TenantGroupId: d.TenantGroupId, IsolationMode: d.IsolationMode,
		PreferDedicatedCapacity: d.PreferDedicatedCapacity, AllowSharedFallback: d.AllowSharedFallback,
		RuntimeInstanceIdPrefix: d.RuntimeInstanceIdPrefix, MaxRuntimeInstances: d.MaxRuntimeInstances,
		WorkerCountPerInstance: d.WorkerCount, MaxConcurrentRunsPerInstance: d.MaxConcurrentRuns,
		LocalQueueCapacity: d.QueueCapacity, MaxLocalWorkersPerExecution: d.MaxLocalWorkersPerExecution}
}

// stop stops one instance through its provider (control op stop_instance) and removes its
// registry entry.
func (lc *tenantLifecycle) stop(ctx context.Context, d *messages.CapacityDescriptor) error {
	res := lc.n.providers.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: d.RuntimeInstanceId, Op: "stop_instance"})
	if !res.GetOk() {
		return fmt.Errorf("stop instance %s: %s", d.RuntimeInstanceId, res.GetReason())
	}
	if err := lc.n.env.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
		return fmt.Errorf("unregister instance %s: %w", d.RuntimeInstanceId, err)
	}
	return nil
}

// stopIdle stops the instances of live that lifecycle.ScaleIn picks for maxInstances and
// returns the ids it stopped. Busy instances are left for a later sweep.
func (lc *tenantLifecycle) stopIdle(ctx context.Context, live []*messages.CapacityDescriptor, maxInstances int) []string {
	var stopped []string
	for _, id := range lifecycle.ScaleIn(live, maxInstances) {
		if err := lc.stop(ctx, find(live, id)); err != nil {
			lc.n.env.log.Warn("tenant lifecycle: stop instance", zap.String("runtime_instance_id", id), zap.Error(err))
			continue
		}
		stopped = append(stopped, id)
	}
	return stopped
}

// scopeEnvelope carries a message for the scope actor of key through the tenant supervisor.
type scopeEnvelope struct {
	key string
	msg any
}

// Messages of a tenant scope actor. Each is answered with the scope's *messages.TenantState.
type (
	// ensureReady is a routed request: touch and answer the state (EnsureReady of seed 001).
	ensureReady struct{ at time.Time }
	// touchScope records a routed request at at without an answer (Touch).
	touchScope struct{ at time.Time }
	// scopeUp records ready capacity: ensured at at, no longer at zero.
	scopeUp struct{ at time.Time }
	// scopeDown records the scope at zero since at (scale to zero, suspension).
	scopeDown struct{ at time.Time }
	// scopeState asks for the state (Sweep reads it).
	scopeState struct{}
)

// tenantSupervisor is the parent of the tenant scope actors ("tenant-<scope key>", spawned on
// demand) and drives the idle sweep and weekly sweep on real-time tickers.
//
// Supervisor strategy: one-for-one, restart a scope up to 10 times a minute; a restarted
// scope reloads its state from the store (at most TouchInterval of last-seen is lost).
type tenantSupervisor struct {
	lc       *tenantLifecycle
	stopTick func()
	sweeping bool
}

var tenantScopeSupervisor = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)

type (
	idleSweepTick   struct{}
	weeklySweepTick struct{}
	sweepDone       struct{}
)

func (s *tenantSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.lc.setSupervisor(c.Self())
		s.startTickers(c)
	case *actor.Stopping, *actor.Restarting:
		s.lc.clearSupervisor(c.Self())
		if s.stopTick != nil {
			s.stopTick()
			s.stopTick = nil
		}
	case *scopeEnvelope:
		name := "tenant-" + m.key
		pid := actor.NewPID(c.Self().Address, c.Self().Id+"/"+name)
		found := false
		for _, ch := range c.Children() {
			if ch.Id == pid.Id {
				found = true
				break
			}
		}
		if !found {
			spawned, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
				return &tenantScope{lc: s.lc, key: m.key}
			}), name)
			if err != nil && !errors.Is(err, actor.ErrNameExists) {
				s.lc.n.env.log.Warn("spawn tenant scope", zap.String("scope", m.key), zap.Error(err))
				return
			}
			if err == nil {
				pid = spawned
			}
		}
		c.Forward(pid)
	case *idleSweepTick, *weeklySweepTick:
		if s.sweeping {
			return
		}
		s.sweeping = true
		self, sys, lc := c.Self(), c.ActorSystem(), s.lc
		_, weekly := m.(*weeklySweepTick)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var err error
			if weekly {
				_, err = lc.weeklySweep(ctx)
			} else {
				_, err = lc.sweep(ctx)
			}
			if err != nil {
				lc.n.env.log.Warn("tenant lifecycle sweep", zap.Bool("weekly", weekly), zap.Error(err))
			}
			sys.Root.Send(self, &sweepDone{})
		}()
	case *sweepDone:
		s.sweeping = false
	}
}

func (s *tenantSupervisor) startTickers(c actor.Context) {
	self, sys := c.Self(), c.ActorSystem()
	idle := time.NewTicker(s.lc.cfg.IdleSweepInterval)
	weekly := time.NewTicker(s.lc.cfg.WeeklySweepInterval)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-idle.C:
				sys.Root.Send(self, &idleSweepTick{})
			case <-weekly.C:
				sys.Root.Send(self, &weeklySweepTick{})
			case <-done:
				return
			}
		}
	}()
	s.stopTick = func() { idle.Stop(); weekly.Stop(); close(done) }
}

// tenantScope owns the lifecycle state of one scope: last seen (written at most once per
// TouchInterval), ensured and scaled-to-zero times. It does its small store reads and writes
// inline, bounded by scopeTimeout; the long work (stopping instances, waiting for capacity)
// runs in the callers' goroutines.
type tenantScope struct {
	lc        *tenantLifecycle
	key       string
	state     *messages.TenantState
	lastWrite time.Time
}

func (s *tenantScope) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.load()
	case *scopeEnvelope:
		s.handle(c, m.msg)
	}
}

func (s *tenantScope) handle(c actor.Context, msg any) {
	switch m := msg.(type) {
	case *ensureReady:
		s.touch(m.at)
	case *touchScope:
		s.touch(m.at)
		return
	case *scopeUp:
		if s.state.ScaledToZeroAt != 0 || s.state.EnsuredAt == 0 {
			s.state.ScaledToZeroAt, s.state.EnsuredAt = 0, m.at.UnixNano()
			s.persist(m.at)
		}
	case *scopeDown:
		s.state.ScaledToZeroAt = m.at.UnixNano()
		s.persist(m.at)
	case *scopeState:
	}
	c.Respond(proto.Clone(s.state))
}

func (s *tenantScope) load() {
	ctx, cancel := context.WithTimeout(context.Background(), scopeTimeout)
	defer cancel()
	st, err := s.lc.n.env.st.GetTenantState(ctx, s.key)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.lc.n.env.log.Warn("load tenant state", zap.String("scope", s.key), zap.Error(err))
		}
		st = &messages.TenantState{TenantId: s.key}
	}
	s.state = st
}

func (s *tenantScope) touch(at time.Time) {
	if ns := at.UnixNano(); ns > s.state.LastSeenAt {
		s.state.LastSeenAt = ns
	}
	if lifecycle.TouchDue(s.lastWrite, at, s.lc.cfg) {
		s.persist(at)
	}
}

func (s *tenantScope) persist(at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), scopeTimeout)
	defer cancel()
	if err := s.lc.n.env.st.PutTenantState(ctx, s.state); err != nil {
		s.lc.n.env.log.Warn("store tenant state", zap.String("scope", s.key), zap.Error(err))
		return
	}
	s.lastWrite = at
}
