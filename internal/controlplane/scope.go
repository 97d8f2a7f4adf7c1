package controlplane

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// ScopeOp is one operation on a tenant scope's lifecycle state.
type ScopeOp int

const (
	// ScopeEnsureReady is a routed request: touch the scope and answer its state (EnsureReady
	// of seed 001).
	ScopeEnsureReady ScopeOp = iota
	// ScopeTouch records a routed request (last seen) without an answer.
	ScopeTouch
	// ScopeUp records ready capacity: ensured now, no longer at zero.
	ScopeUp
	// ScopeDown records the scope at zero from now (scale to zero, suspension).
	ScopeDown
	// ScopeRead answers the state (the sweep reads it).
	ScopeRead
)

func (o ScopeOp) String() string {
	switch o {
	case ScopeEnsureReady:
		return "ensure-ready"
	case ScopeTouch:
		return "touch"
	case ScopeUp:
		return "up"
	case ScopeDown:
		return "down"
	case ScopeRead:
		return "read"
	}
	return "unknown"
}

// Scopes are the tenant scope actors as the lifecycle service sees them: one owner of each
// scope's state, so that concurrent requests of a tenant update it in order.
type Scopes interface {
	// Available reports whether this node runs the tenant scopes (control-plane role).
	Available() bool
	// Ask applies op at time at to the scope key and returns its state after the op (the
	// caller owns it). It blocks until the scope answers or ctx ends.
	Ask(ctx context.Context, key string, op ScopeOp, at time.Time) (*messages.TenantState, error)
}

// Scope is the lifecycle state of one tenant scope: last seen (written at most once per
// TouchInterval), ensured and scaled-to-zero times. It is not goroutine-safe: one owner (the
// tenant scope actor) calls it, and its small store reads and writes run inline.
type Scope struct {
	st        store.TenantStates
	cfg       lifecycle.Config
	log       *zap.Logger
	state     *messages.TenantState
	lastWrite time.Time
}

// LoadScope reads scope key's state (a fresh state when none is stored or the read fails; a
// failure is logged). cfg's zero fields mean lifecycle.DefaultConfig's values.
func LoadScope(ctx context.Context, st store.TenantStates, key string, cfg lifecycle.Config, log *zap.Logger) *Scope {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Scope{st: st, cfg: cfg.WithDefaults(), log: log.With(zap.String("scope", key))}
	state, err := st.GetTenantState(ctx, key)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("load tenant state", zap.Error(err))
		}
		state = &messages.TenantState{TenantId: key}
	}
	s.state = state
	return s
}

// Apply performs op at time at, persisting the state when it changed in a way that must
// survive (touches are written at most once per TouchInterval), and returns a copy of the
// state.
func (s *Scope) Apply(ctx context.Context, op ScopeOp, at time.Time) *messages.TenantState {
	switch op {
	case ScopeEnsureReady, ScopeTouch:
		if ns := at.UnixNano(); ns > s.state.LastSeenAt {
			s.state.LastSeenAt = ns
		}
		if lifecycle.TouchDue(s.lastWrite, at, s.cfg) {
			s.persist(ctx, at)
		}
	case ScopeUp:
		if s.state.ScaledToZeroAt != 0 || s.state.EnsuredAt == 0 {
			s.state.ScaledToZeroAt, s.state.EnsuredAt = 0, at.UnixNano()
			s.persist(ctx, at)
		}
	case ScopeDown:
		s.state.ScaledToZeroAt = at.UnixNano()
		s.persist(ctx, at)
	case ScopeRead:
	}
	return proto.Clone(s.state).(*messages.TenantState)
}

func (s *Scope) persist(ctx context.Context, at time.Time) {
	if err := s.st.PutTenantState(ctx, s.state); err != nil {
		s.log.Warn("store tenant state", zap.Error(err))
		return
	}
	s.lastWrite = at
}
