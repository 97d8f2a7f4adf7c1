package controlplane_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// TestDispatcher_HandOff_staleViewsNeverOverCommit: two control planes whose instance views
// both show the one-slot instance free hand off two new runs at once: at most one is created
// assigned, the other is not stored at all (its caller creates and queues it), and the
// instance never holds two runs.
func TestDispatcher_HandOff_staleViewsNeverOverCommit(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	cps := []*plane{newPlane(t, st), newPlane(t, st)}
	require.NoError(t, st.PutTenant(ctx, dedicated("acme")))
	require.NoError(t, st.PutInstance(ctx, ready("acme-runtime-1", "acme", 1), time.Minute))
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		handed := make([]bool, len(cps))
		for i, p := range cps {
			run := &messages.SharedRun{SharedRunId: fmt.Sprintf("r%d-%d", round, i), TenantId: "acme", Status: messages.RunQueued,
				Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				handed[i], err = p.dispatcher.HandOff(ctx, run, "direct-cp")
				require.NoError(t, err)
			}()
		}
		wg.Wait()
		n, err := st.ReservationCount(ctx, "acme-runtime-1")
		require.NoError(t, err)
		require.False(t, handed[0] && handed[1], "round %d: two hand-offs to one slot", round)
		for i := range cps {
			_, err := st.GetRun(ctx, fmt.Sprintf("r%d-%d", round, i))
			if handed[i] {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, store.ErrNotFound, "a run not handed off is not stored by HandOff")
			}
		}
		if handed[0] || handed[1] {
			require.Equal(t, 1, n, "round %d", round)
		} else {
			// Both views still count the last round's hold (released behind their back): a
			// stale view costs a trip through the queue, never an over-commit.
			require.Zero(t, n, "round %d", round)
			require.NotZero(t, round, "the first round has fresh views")
		}
		for i := range cps {
			require.NoError(t, st.ReleaseReservation(ctx, "acme-runtime-1", fmt.Sprintf("r%d-%d", round, i)))
		}
	}
}

// TestDispatcher_Cycle_staleViewCostsARetry: the pump's view says the second instance has
// room, but another control plane took its slot since: the assignment is refused atomically,
// the run waits with reason no-free-slot, and nothing is over-committed or parked for
// scale-out.
func TestDispatcher_Cycle_staleViewCostsARetry(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	d, err := controlplane.NewDispatcher(st, controlplane.DispatcherConfig{ReservationTTL: time.Minute, Router: p.router,
		Ledger: ledger.NewWriter(st, ledger.WriterConfig{}), Tenants: p.tenants, Scaler: p.scaler, ViewTTL: time.Hour})
	require.NoError(t, err)
	settings := dedicated("acme")
	settings.MaxRuntimeInstances = 2
	require.NoError(t, st.PutTenant(ctx, settings))
	for _, id := range []string{"acme-runtime-1", "acme-runtime-2"} {
		x := ready(id, "acme", 1)
		x.MaxRuntimeInstances = 2
		require.NoError(t, st.PutInstance(ctx, x, time.Minute))
	}
	queued(t, st, "warm", "acme")
	_, settled, err := d.Cycle(ctx, "pump-cp") // reads the view: one instance taken, one free
	require.NoError(t, err)
	require.Equal(t, 1, settled)

	warm, err := st.GetRun(ctx, "warm")
	require.NoError(t, err)
	free := "acme-runtime-1"
	if warm.AssignedRuntimeInstanceId == free {
		free = "acme-runtime-2"
	}
	ok, err := st.Reserve(ctx, free, "other-cp-run", 1, time.Minute) // behind the view's back
	require.NoError(t, err)
	require.True(t, ok)
	queued(t, st, "r1", "acme")
	claimed, settled, err := d.Cycle(ctx, "pump-cp")
	require.NoError(t, err)
	require.Equal(t, 1, claimed)
	require.Zero(t, settled)
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status)
	require.Equal(t, controlplane.ReasonNoFreeSlot, run.FailureReason)
	for _, id := range []string{"acme-runtime-1", "acme-runtime-2"} {
		n, err := st.ReservationCount(ctx, id)
		require.NoError(t, err)
		require.Equal(t, 1, n, id)
	}
	reqs, err := st.ListScaleOuts(ctx, messages.ScaleOutPending, messages.ScaleOutProvisioning)
	require.NoError(t, err)
	require.Empty(t, reqs)
	pending, _, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, pending, "the run is back in the queue")
	_, isAssigner := st.(store.Assigner)
	require.True(t, isAssigner, "the test store takes the fast path")
}

// lateBacklog is the embedded store whose first Backlog read answers "nothing waits", as a
// read taken just before a run was queued does.
type lateBacklog struct {
	*boltstore.Store
	read atomic.Bool
}

func (s *lateBacklog) Backlog(ctx context.Context, limit int) ([]store.TenantBacklog, error) {
	if !s.read.Swap(true) {
		return nil, nil
	}
	return s.Store.Backlog(ctx, limit)
}

// TestDispatcher_Cycle_quotaBoundRunOnAFastCycleTakesItsHold: a run of a tenant with
// max_concurrent_runs that a fast cycle claims (it was queued after the cycle read an empty
// backlog) is dispatched with the tenant's hold, so the quota still counts it.
func TestDispatcher_Cycle_quotaBoundRunOnAFastCycleTakesItsHold(t *testing.T) {
	ctx := testCtx(t)
	st := &lateBacklog{Store: openStore(t).(*boltstore.Store)}
	p := newPlane(t, st)
	settings := dedicated("acme")
	settings.MaxConcurrentRuns = 1
	require.NoError(t, st.PutTenant(ctx, settings))
	require.NoError(t, st.PutInstance(ctx, ready("acme-runtime-1", "acme", 4), time.Minute))
	queued(t, st, "r1", "acme")
	queued(t, st, "r2", "acme")
	_, _, err := p.dispatcher.Cycle(ctx, "pump-cp")
	require.NoError(t, err)
	require.True(t, st.read.Load(), "the cycle read the backlog")
	held, err := st.ReservationCount(ctx, store.TenantHolds("acme"))
	require.NoError(t, err)
	require.Equal(t, 1, held, "tenant holds")
	active := 0
	for _, id := range []string{"r1", "r2"} {
		r, err := st.GetRun(ctx, id)
		require.NoError(t, err)
		if r.Status == messages.RunDispatched {
			active++
		}
	}
	require.Equal(t, 1, active, "runs dispatched under a quota of 1")
}
