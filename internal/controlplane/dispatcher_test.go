package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// staleCounts is the store as a pump sees it when another dispatch takes an instance's last
// slot between the pump's reservation count and its Reserve call: every count reads 0.
type staleCounts struct{ store.Store }

func (staleCounts) ReservationCount(context.Context, string) (int, error) { return 0, nil }

// TestDispatcher_DispatchRun_slotLostToAConcurrentDispatch: the pump chose an instance whose
// last slot a parallel dispatch took first. The instance is full, not gone: the run waits
// (recorded once, reason no-free-slot) instead of asking for a scale-out that the tenant's
// maximum refuses.
func TestDispatcher_DispatchRun_slotLostToAConcurrentDispatch(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, staleCounts{st})
	require.NoError(t, st.PutTenant(ctx, dedicated("acme")))
	require.NoError(t, st.PutInstance(ctx, ready("acme-runtime-1", "acme", 1), time.Minute))
	ok, err := st.Reserve(ctx, "acme-runtime-1", "other", 1, time.Minute) // the parallel dispatch's slot
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Status: messages.RunQueued,
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	require.NoError(t, err)

	for cycle := 0; cycle < 3; cycle++ {
		out, err := p.dispatcher.DispatchRun(ctx, "r1", "pump-cp", nil)
		require.NoError(t, err)
		require.Equal(t, controlplane.Requeue, out, "cycle %d", cycle)
	}
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status)
	require.Equal(t, "no-free-slot", run.FailureReason)
	reqs, err := st.ListScaleOuts(ctx, messages.ScaleOutPending, messages.ScaleOutProvisioning, messages.ScaleOutFailed)
	require.NoError(t, err)
	require.Empty(t, reqs, "a scale-out was requested for a tenant at its maximum")
	entries, err := st.ReadLedger(ctx, "r1", 0, 0)
	require.NoError(t, err)
	refused := 0
	for _, en := range entries {
		if en.Kind == messages.KindReservation && en.Reason == "no-free-slot" {
			refused++
		}
	}
	require.Equal(t, 1, refused, "the wait is recorded once over three cycles")
}

// TestDispatcher_Cycle_dispatchesToAnEligibleInstance: one cycle claims the queued run,
// reserves a slot, marks the run dispatched to the instance, delivers it and acks the claim.
func TestDispatcher_Cycle_dispatchesToAnEligibleInstance(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	require.NoError(t, st.PutInstance(ctx, ready("runtime-instance-1", "", 2), time.Minute))
	queued(t, st, "r1", "acme")

	claimed, settled, err := p.dispatcher.Cycle(ctx, "pump-cp")
	require.NoError(t, err)
	require.Equal(t, 1, claimed)
	require.Equal(t, 1, settled)
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunDispatched, run.Status)
	require.Equal(t, "runtime-instance-1", run.AssignedRuntimeInstanceId)
	require.Equal(t, "pump-cp", run.PumpRuntimeInstanceId)
	require.EqualValues(t, 1, run.Attempts)
	n, err := st.ReservationCount(ctx, "runtime-instance-1")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the run's slot is held")
	require.Equal(t, []string{messages.KindAdmission, messages.KindReservation, messages.KindDispatch}, kinds(t, st, "r1"))
	require.Len(t, p.router.dispatch, 1)
	require.Equal(t, "shared-queue", p.router.dispatch[0].Source)
	pending, claimedNow, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.Zero(t, pending+claimedNow, "the claim was acked")
}

// TestDispatcher_Cycle_failedDeliveryRequeuesAndReleases: a retryable provider failure puts
// the run back in the queue with the provider's reason and frees its slot.
func TestDispatcher_Cycle_failedDeliveryRequeuesAndReleases(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	p.router.ok, p.router.retryable, p.router.reason = false, true, "dispatch-timeout"
	require.NoError(t, st.PutInstance(ctx, ready("runtime-instance-1", "", 2), time.Minute))
	queued(t, st, "r1", "acme")

	claimed, settled, err := p.dispatcher.Cycle(ctx, "pump-cp")
	require.NoError(t, err)
	require.Equal(t, 1, claimed)
	require.Zero(t, settled)
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status)
	require.Equal(t, "dispatch-timeout", run.FailureReason)
	n, err := st.ReservationCount(ctx, "runtime-instance-1")
	require.NoError(t, err)
	require.Zero(t, n, "the slot of a failed delivery is released")
	require.Contains(t, kinds(t, st, "r1"), messages.KindDispatchFailed)
	pending, _, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, pending, "the claim was released")
}

// TestDispatcher_Cycle_parksRunForScaleOut: without capacity in its scope the run is parked on
// a new scale-out request, and the scale-out supervisor is woken.
func TestDispatcher_Cycle_parksRunForScaleOut(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	require.NoError(t, st.PutTenant(ctx, dedicated("acme")))
	queued(t, st, "r1", "acme")

	_, settled, err := p.dispatcher.Cycle(ctx, "pump-cp")
	require.NoError(t, err)
	require.Equal(t, 1, settled)
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunScaleOutRequested, run.Status)
	require.Equal(t, []string{run.ScaleOutRequestId}, p.requests())
	req, err := st.GetScaleOut(ctx, run.ScaleOutRequestId)
	require.NoError(t, err)
	require.Equal(t, "acme", req.GetSettings().GetTenantId())
	require.Equal(t, "r1", req.SharedRunId)
	require.Equal(t, []string{messages.KindAdmission, messages.KindScaleOutRequested}, kinds(t, st, "r1"))
}

// TestDispatcher_DispatchRun_rejectsARunWithoutContext: a run without an execution context
// fails at once, with its terminal ledger entry.
func TestDispatcher_DispatchRun_rejectsARunWithoutContext(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", Status: messages.RunQueued})
	require.NoError(t, err)
	out, err := p.dispatcher.DispatchRun(ctx, "r1", "pump-cp", nil)
	require.NoError(t, err)
	require.Equal(t, controlplane.Done, out)
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunFailed, run.Status)
	require.Equal(t, "missing-execution-context", run.FailureReason)
	require.Equal(t, []string{messages.KindRunFailed}, kinds(t, st, "r1"))
}
