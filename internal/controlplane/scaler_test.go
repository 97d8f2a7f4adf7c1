package controlplane_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ledger"
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

// TestScaler_Pending_backoff: the scope's latest failed request counts as pending for the
// cooldown doubled once per other failure of the scope in the last 15 minutes, at most 2^7
// times: one row per rule.
func TestScaler_Pending_backoff(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		failures []time.Duration // before t0
		at       time.Duration   // after t0
		want     int
	}{
		{"one failure, within the cooldown", []time.Duration{0}, 500 * time.Millisecond, 1},
		{"one failure, past the cooldown", []time.Duration{0}, 1500 * time.Millisecond, 0},
		{"three failures: four cooldowns", []time.Duration{10 * time.Second, 5 * time.Second, 0}, 3 * time.Second, 1},
		{"three failures, past four cooldowns", []time.Duration{10 * time.Second, 5 * time.Second, 0}, 5 * time.Second, 0},
		{"a failure outside the window does not double", []time.Duration{20 * time.Minute, 0}, 1500 * time.Millisecond, 0},
		{"twenty failures: capped at 128 cooldowns", make([]time.Duration, 20), 100 * time.Second, 1},
		{"twenty failures, past the cap", make([]time.Duration, 20), 130 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := openStore(t)
			now := t0.Add(tc.at)
			sc, err := controlplane.NewScaler(st, controlplane.ScalerConfig{Holder: "cp-1", Router: &router{}, Ledger: ledger.NewWriter(st, ledger.WriterConfig{}),
				Tenants: controlplane.NewTenants(st, controlplane.TenantsConfig{}), Group: group(t), Cooldown: time.Second,
				Now: func() time.Time { return now }})
			require.NoError(t, err)
			for i, ago := range tc.failures {
				at := t0.Add(-ago).UnixNano()
				require.NoError(t, st.CreateScaleOut(ctx, &messages.ScaleOutRequest{RequestId: fmt.Sprintf("so-%d", i), Settings: dedicated("acme"),
					Status: messages.ScaleOutFailed, CreatedAt: at, UpdatedAt: at}))
			}
			n, failing, err := sc.PendingOrFailing(ctx, dedicated("acme"))
			require.NoError(t, err)
			require.Equal(t, tc.want, n)
			require.Equal(t, tc.want == 1, failing, "the count is the cooling failure")
		})
	}
}
