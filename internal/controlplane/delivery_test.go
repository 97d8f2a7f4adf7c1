package controlplane_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/messages"
)

// TestDispatcher_Cycle_nonRetryableFailureIsNotRetried: a provider failure marked not
// retryable fails the run at once with the provider's reason (one dispatch, no requeue), and
// frees its slot.
func TestDispatcher_Cycle_nonRetryableFailureIsNotRetried(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	p.router.ok, p.router.retryable, p.router.reason = false, false, "http-command-non-retryable"
	require.NoError(t, st.PutInstance(ctx, ready("runtime-instance-1", "", 2), time.Minute))
	queued(t, st, "r1", "acme")

	_, settled, err := p.dispatcher.Cycle(ctx, "pump-cp")
	require.NoError(t, err)
	require.Equal(t, 1, settled, "the run left the queue")
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunFailed, run.Status)
	require.Equal(t, controlplane.ReasonDispatchNonRetryable+": http-command-non-retryable", run.FailureReason)
	require.Len(t, p.router.dispatch, 1)
	n, err := st.ReservationCount(ctx, "runtime-instance-1")
	require.NoError(t, err)
	require.Zero(t, n)
	pending, claimed, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.Zero(t, pending+claimed)
}

// TestReconciler_Reconcile_openCircuitMarksTheRegistry: retryable dispatch failures open the
// instance's circuit; the reconciler writes the instance back to the registry as unhealthy
// (reason circuit-open, no longer accepting runs, expiring with its own heartbeat) and asks
// for a replacement in its scope, once.
func TestReconciler_Reconcile_openCircuitMarksTheRegistry(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	circuits := controlplane.NewCircuits()
	r, err := controlplane.NewReconciler(st, controlplane.ReconcilerConfig{Holder: "cp-1", Circuits: circuits, Tenants: p.tenants,
		Scaler: p.scaler, HeartbeatTTL: 5 * time.Second})
	require.NoError(t, err)
	d := ready("runtime-instance-1", "", 2)
	d.MaxRuntimeInstances = 2
	require.NoError(t, st.PutInstance(ctx, d, time.Minute))
	fail := &messages.ProviderResult{Ok: false, Retryable: true, Reason: "http-retry-exhausted: 3 attempts, last http-command-failed"}
	opened := false
	for range controlplane.CircuitFailures {
		opened = circuits.Record(d.RuntimeInstanceId, fail, time.Now())
	}
	require.True(t, opened)

	flagged := r.Reconcile(ctx, map[string]bool{})
	require.True(t, flagged["runtime-instance-1"])
	got, err := st.GetInstance(ctx, "runtime-instance-1")
	require.NoError(t, err)
	require.Equal(t, messages.InstanceUnhealthy, got.Status)
	require.False(t, got.CanAcceptRun)
	require.Equal(t, controlplane.ReasonCircuitOpen, got.Metadata[controlplane.MetadataHealthReason])
	require.Equal(t, d.LastHeartbeatAt, got.LastHeartbeatAt, "the mark keeps the instance's heartbeat")
	require.Len(t, p.requests(), 1, "one replacement requested")
	r.Reconcile(ctx, flagged)
	require.Len(t, p.requests(), 1)
	require.True(t, strings.HasPrefix(fail.Reason, "http-"))
}
