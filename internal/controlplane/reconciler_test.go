package controlplane_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// TestReconciler_Reconcile_replacesAStaleInstanceOnce: an instance whose heartbeat went stale
// is flagged and one replacement is requested for its scope, not one per pass; once it is
// healthy again it is unflagged.
func TestReconciler_Reconcile_replacesAStaleInstanceOnce(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	r, err := controlplane.NewReconciler(st, controlplane.ReconcilerConfig{Holder: "cp-1", Circuits: controlplane.NewCircuits(),
		Tenants: p.tenants, Scaler: p.scaler})
	require.NoError(t, err)
	stale := ready("runtime-instance-1", "", 2)
	stale.LastHeartbeatAt = time.Now().Add(-time.Minute).UnixNano()
	require.NoError(t, st.PutInstance(ctx, stale, time.Minute))
	require.NoError(t, st.PutInstance(ctx, ready("runtime-instance-2", "", 2), time.Minute))

	flagged := r.Reconcile(ctx, map[string]bool{})
	require.Equal(t, map[string]bool{"runtime-instance-1": true}, flagged)
	require.Len(t, p.requests(), 1)
	flagged = r.Reconcile(ctx, flagged)
	require.Len(t, p.requests(), 1, "a flagged instance was acted on twice")

	require.NoError(t, st.PutInstance(ctx, ready("runtime-instance-1", "", 2), time.Minute))
	require.Empty(t, r.Reconcile(ctx, flagged))
}

// TestReconciler_Reconcile_scopeAtItsMaximum: no replacement when the scope's healthy
// instances and pending requests already reach its maximum.
func TestReconciler_Reconcile_scopeAtItsMaximum(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	r, err := controlplane.NewReconciler(st, controlplane.ReconcilerConfig{Holder: "cp-1", Circuits: controlplane.NewCircuits(),
		Tenants: p.tenants, Scaler: p.scaler})
	require.NoError(t, err)
	stale := ready("runtime-instance-1", "", 2)
	stale.MaxRuntimeInstances, stale.LastHeartbeatAt = 1, time.Now().Add(-time.Minute).UnixNano()
	require.NoError(t, st.PutInstance(ctx, stale, time.Minute))
	_, err = p.scaler.Request(ctx, controlplaneShared(1), "", "")
	require.NoError(t, err)

	r.Reconcile(ctx, map[string]bool{})
	require.Len(t, p.requests(), 1, "a replacement beyond the scope's maximum was requested")
}

// slowList is a registry whose ListInstances takes a minute of the reconciler's clock.
type slowList struct {
	store.Store
	clock *atomic.Int64 // unix nanoseconds
}

func (s slowList) ListInstances(ctx context.Context) ([]*messages.CapacityDescriptor, error) {
	list, err := s.Store.ListInstances(ctx)
	s.clock.Add(int64(time.Minute))
	return list, err
}

// TestReconciler_Reconcile_aSlowListAgesNoHeartbeat: a heartbeat is judged against the time
// the list began, not the time it answered: a loaded store that answers late must not make a
// healthy instance look stale (the reconciler would ask to replace it).
func TestReconciler_Reconcile_aSlowListAgesNoHeartbeat(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	r, err := controlplane.NewReconciler(slowList{st, &clock}, controlplane.ReconcilerConfig{Holder: "cp-1", Circuits: controlplane.NewCircuits(),
		Tenants: p.tenants, Scaler: p.scaler, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	require.NoError(t, err)
	d := ready("runtime-instance-1", "", 2)
	d.LastHeartbeatAt = clock.Load()
	require.NoError(t, st.PutInstance(ctx, d, time.Hour))

	require.Empty(t, r.Reconcile(ctx, map[string]bool{}), "a heartbeat fresh when the list began was judged stale")
	require.Empty(t, p.requests())
}
