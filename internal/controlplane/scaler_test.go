package controlplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/messages"
)

// TestScaler_Process_fulfilsAndRequeuesTheScope: a processed request ends fulfilled with the
// provider's instance ids, and the runs parked in its scope go back to the queue.
func TestScaler_Process_fulfilsAndRequeuesTheScope(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	p.router.created = []string{"acme-runtime-1"}
	require.NoError(t, st.PutTenant(ctx, dedicated("acme")))
	run := queued(t, st, "r1", "acme")
	require.NoError(t, p.scaler.ParkRun(ctx, run, dedicated("acme"), "no-tenant-visible-capacity"))
	ids := p.requests()
	require.Len(t, ids, 1)
	n, err := p.scaler.Pending(ctx, dedicated("acme"))
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, p.scaler.Process(ctx, ids[0]))
	req, err := st.GetScaleOut(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, messages.ScaleOutFulfilled, req.Status)
	require.Equal(t, []string{"acme-runtime-1"}, req.RuntimeInstanceIds)
	got, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, got.Status)
	require.Equal(t, []string{messages.KindScaleOutRequested, messages.KindScaleOutFulfilled}, kinds(t, st, "r1"))
	n, err = p.scaler.Pending(ctx, dedicated("acme"))
	require.NoError(t, err)
	require.Zero(t, n)
	unfinished, err := p.scaler.Unfinished(ctx)
	require.NoError(t, err)
	require.Empty(t, unfinished)
}

// TestScaler_Process_leaseHeldElsewhere: a request another control plane owns is left alone.
func TestScaler_Process_leaseHeldElsewhere(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	req, err := p.scaler.Request(ctx, dedicated("acme"), "", "")
	require.NoError(t, err)
	ok, err := st.AcquireLease(ctx, "scaleout/"+req.RequestId, "cp-2", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, p.scaler.Process(ctx, req.RequestId))
	got, err := st.GetScaleOut(ctx, req.RequestId)
	require.NoError(t, err)
	require.Equal(t, messages.ScaleOutPending, got.Status)
	require.Empty(t, p.router.scaleOuts)
}

// TestScaler_Pending_failedRequestCountsForItsCooldown: a request that just failed still
// counts, so a failing provider is not asked again by every pump cycle.
func TestScaler_Pending_failedRequestCountsForItsCooldown(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	p.router.ok, p.router.reason = false, "quota"
	req, err := p.scaler.Request(ctx, dedicated("acme"), "", "")
	require.NoError(t, err)
	require.NoError(t, p.scaler.Process(ctx, req.RequestId))
	got, err := st.GetScaleOut(ctx, req.RequestId)
	require.NoError(t, err)
	require.Equal(t, messages.ScaleOutFailed, got.Status)
	require.Equal(t, "quota", got.FailureReason)
	n, err := p.scaler.Pending(ctx, dedicated("acme"))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	other, err := p.scaler.Pending(ctx, dedicated("globex"))
	require.NoError(t, err)
	require.Zero(t, other, "another scope's request counted")
}
