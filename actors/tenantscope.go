package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/messages"
)

// Timings of the tenant actors: a scope's round trip and inline store I/O, and one sweep.
const (
	scopeTimeout = 5 * time.Second
	sweepTimeout = time.Minute
)

// scopeEnvelope carries an operation for the scope actor of key through the tenant supervisor.
// The scope answers with its *messages.TenantState (except to ScopeTouch).
type scopeEnvelope struct {
	key string
	op  controlplane.ScopeOp
	at  time.Time
}

// tenantSupervisor is the parent of the tenant scope actors ("tenant-<scope key>", spawned on
// demand) and drives the idle sweep and the weekly sweep (controlplane.Lifecycle) on tickers.
//
// Supervisor strategy: one-for-one, restart a scope up to 10 times a minute; a restarted scope
// reloads its state from the store (at most TouchInterval of last-seen is lost).
type tenantSupervisor struct {
	env      *env
	plane    *plane
	sweep    job
	stopIdle func()
	stopWeek func()
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
		s.plane.scopes.set(c.Self())
		lc := s.env.cfg.Lifecycle
		s.stopIdle = s.env.tick(c.Self(), lc.IdleSweepInterval, &idleSweepTick{})
		s.stopWeek = s.env.tick(c.Self(), lc.WeeklySweepInterval, &weeklySweepTick{})
	case *actor.Stopping, *actor.Restarting:
		s.plane.scopes.clear(c.Self())
		if s.stopIdle != nil {
			s.stopIdle()
			s.stopWeek()
		}
	case *scopeEnvelope:
		s.forward(c, m.key)
	case *idleSweepTick, *weeklySweepTick:
		_, weekly := m.(*weeklySweepTick)
		lc := s.plane.lifecycle
		s.sweep.start(s.env, c.Self(), sweepTimeout, func(ctx context.Context) any {
			var err error
			if weekly {
				_, err = lc.WeeklySweep(ctx)
			} else {
				_, err = lc.Sweep(ctx)
			}
			if err != nil {
				s.env.log.Warn("tenant lifecycle sweep", zap.Bool("weekly", weekly), zap.Error(err))
			}
			return &sweepDone{}
		})
	case *sweepDone:
		s.sweep.done()
	}
}

// forward hands the current message to the scope actor of key, spawning it on first use.
func (s *tenantSupervisor) forward(c actor.Context, key string) {
	name := "tenant-" + key
	pid := actor.NewPID(c.Self().Address, c.Self().Id+"/"+name)
	for _, ch := range c.Children() {
		if ch.Id == pid.Id {
			c.Forward(pid)
			return
		}
	}
	spawned, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &tenantScope{env: s.env, key: key} }), name)
	if err != nil && !errors.Is(err, actor.ErrNameExists) {
		s.env.log.Warn("spawn tenant scope", zap.String("scope", key), zap.Error(err))
		return
	}
	if err == nil {
		pid = spawned
	}
	c.Forward(pid)
}

// tenantScope owns the lifecycle state of one scope (controlplane.Scope), so that concurrent
// requests of a tenant update it in order. Its small store reads and writes run inline,
// bounded by scopeTimeout; the long work (stopping instances, waiting for capacity) runs in
// the callers' goroutines.
type tenantScope struct {
	env   *env
	key   string
	scope *controlplane.Scope
}

func (s *tenantScope) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		ctx, cancel := context.WithTimeout(s.env.group.Context(), scopeTimeout)
		defer cancel()
		s.scope = controlplane.LoadScope(ctx, s.env.st, s.key, s.env.cfg.Lifecycle, s.env.log)
	case *scopeEnvelope:
		ctx, cancel := context.WithTimeout(s.env.group.Context(), scopeTimeout)
		defer cancel()
		state := s.scope.Apply(ctx, m.op, m.at)
		if m.op != controlplane.ScopeTouch {
			c.Respond(state)
		}
	}
}

// scopeRef is the node's tenant scopes as the lifecycle service reaches them
// (controlplane.Scopes): requests to the tenant supervisor, once it has registered. It is
// goroutine-safe.
type scopeRef struct {
	sys *actor.ActorSystem
	mu  sync.Mutex // guards sup
	sup *actor.PID
}

var _ controlplane.Scopes = (*scopeRef)(nil)

func (s *scopeRef) set(pid *actor.PID) {
	s.mu.Lock()
	s.sup = pid
	s.mu.Unlock()
}

// clear forgets pid unless a newer supervisor registered meanwhile.
func (s *scopeRef) clear(pid *actor.PID) {
	s.mu.Lock()
	if s.sup != nil && s.sup.Equal(pid) {
		s.sup = nil
	}
	s.mu.Unlock()
}

func (s *scopeRef) supervisor() *actor.PID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sup
}

// Available reports whether the tenant supervisor runs on this node.
func (s *scopeRef) Available() bool { return s.supervisor() != nil }

// Ask sends op to the scope actor of key and returns its state. It blocks until the scope
// answers, scopeTimeout passes or ctx ends.
func (s *scopeRef) Ask(ctx context.Context, key string, op controlplane.ScopeOp, at time.Time) (*messages.TenantState, error) {
	sup := s.supervisor()
	if sup == nil {
		return nil, controlplane.ErrNoScopes
	}
	timeout := scopeTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("tenant scope %s: %w", key, context.DeadlineExceeded)
	}
	res, err := s.sys.Root.RequestFuture(sup, &scopeEnvelope{key: key, op: op, at: at}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("tenant scope %s: %w", key, err)
	}
	st, ok := res.(*messages.TenantState)
	if !ok {
		return nil, fmt.Errorf("tenant scope %s: unexpected answer %T", key, res)
	}
	return st, nil
}

// touch records a request of scope key without waiting. It does nothing without scopes.
func (s *scopeRef) touch(key string, at time.Time) {
	if sup := s.supervisor(); sup != nil {
		s.sys.Root.Send(sup, &scopeEnvelope{key: key, op: controlplane.ScopeTouch, at: at})
	}
}
