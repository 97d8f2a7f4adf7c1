package controlplane_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

func controlplaneShared(maxInstances int32) *messages.TenantSettings {
	t := tenancy.Defaults("")
	t.MaxRuntimeInstances = maxInstances
	return t
}

// scopes runs the tenant scopes in the test's goroutine, one Scope per key, as the tenant
// scope actors do.
type scopes struct {
	st  store.TenantStates
	cfg lifecycle.Config
	mu  sync.Mutex // guards m
	m   map[string]*controlplane.Scope
}

func (s *scopes) Available() bool { return true }

func (s *scopes) Ask(ctx context.Context, key string, op controlplane.ScopeOp, at time.Time) (*messages.TenantState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.m[key]
	if sc == nil {
		sc = controlplane.LoadScope(ctx, s.st, key, s.cfg, nil)
		s.m[key] = sc
	}
	return sc.Apply(ctx, op, at), nil
}

func newLifecycle(t *testing.T, p *plane, cfg lifecycle.Config, now func() time.Time) *controlplane.Lifecycle {
	t.Helper()
	l, err := controlplane.NewLifecycle(p.st, controlplane.LifecycleConfig{Lifecycle: cfg, Scaler: p.scaler, Control: p.router, Now: now,
		Scopes: &scopes{st: p.st, cfg: cfg, m: map[string]*controlplane.Scope{}}})
	require.NoError(t, err)
	return l
}

func TestScope_Apply(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	t0 := time.Unix(1_000_000, 0)
	s := controlplane.LoadScope(ctx, st, "acme", lifecycle.Config{}, nil)
	got := s.Apply(ctx, controlplane.ScopeEnsureReady, t0)
	require.Equal(t, t0.UnixNano(), got.LastSeenAt)
	require.Zero(t, got.EnsuredAt)
	got = s.Apply(ctx, controlplane.ScopeUp, t0)
	require.Equal(t, t0.UnixNano(), got.EnsuredAt)
	got = s.Apply(ctx, controlplane.ScopeDown, t0.Add(time.Hour))
	require.Equal(t, t0.Add(time.Hour).UnixNano(), got.ScaledToZeroAt)
	stored, err := st.GetTenantState(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, got.ScaledToZeroAt, stored.ScaledToZeroAt, "scaling to zero is persisted")
	again := controlplane.LoadScope(ctx, st, "acme", lifecycle.Config{}, nil).Apply(ctx, controlplane.ScopeRead, t0)
	require.Equal(t, got.EnsuredAt, again.EnsuredAt, "a reloaded scope keeps its state")
}

// TestLifecycle_Admit: a first request is admitted without waiting; a suspended tenant is
// refused; a scope at zero cold-starts and fails with NoCapacityError when no capacity comes.
func TestLifecycle_Admit(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	l := newLifecycle(t, p, lifecycle.Config{ColdStartWait: 50 * time.Millisecond, ColdStartRetries: 1}, nil)
	acme := dedicated("acme")
	require.NoError(t, l.Admit(ctx, acme))
	require.Empty(t, p.requests(), "a first request waited for capacity")

	suspended := dedicated("acme")
	suspended.Suspended = true
	require.True(t, errors.Is(l.Admit(ctx, suspended), controlplane.ErrSuspended))

	require.NoError(t, l.Suspend(ctx, acme)) // marks the scope at zero
	err := l.Admit(ctx, acme)
	var nc *controlplane.NoCapacityError
	require.True(t, errors.As(err, &nc), "err = %v", err)
	require.Equal(t, 2, nc.Attempts)
	require.Len(t, p.requests(), 2, "one scale-out request per cold-start attempt")
}

// TestLifecycle_Sweep_scalesAnIdleScopeToZero: an idle dedicated scope's instances are stopped
// through the provider and its records kept at zero replicas.
func TestLifecycle_Sweep_scalesAnIdleScopeToZero(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	now := time.Now()
	clock := func() time.Time { return now }
	l := newLifecycle(t, p, lifecycle.Config{IdleTimeout: time.Minute}, clock)
	require.NoError(t, st.PutTenant(ctx, dedicated("acme")))
	require.NoError(t, st.PutInstance(ctx, ready("acme-runtime-1", "acme", 1), time.Minute))
	require.NoError(t, l.Admit(ctx, dedicated("acme")))

	rep, err := l.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Stopped, "a scope seen just now was swept")
	now = now.Add(2 * time.Minute)
	rep, err = l.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"acme-runtime-1"}, rep.Stopped)
	require.Equal(t, []string{"acme"}, rep.ScaledToZero)
	require.Len(t, p.router.control, 1)
	require.Equal(t, "stop_instance", p.router.control[0].Op)
	rec, err := st.GetInstanceRecord(ctx, "acme-runtime-1")
	require.NoError(t, err)
	require.Zero(t, rec.Replicas)
}
