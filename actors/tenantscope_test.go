package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/storetest"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/testkit"
)

// lifecycleNode starts a node whose clock is clock and puts a dedicated tenant "acme" with
// settings changed by edit, plus the pipelines "quick" (one echo step) and "nap" (one 1s sleep).
func lifecycleNode(t *testing.T, b testkit.Backend, clock *storetest.FakeClock, cfg actors.Config,
	edit func(*messages.TenantSettings)) (*actors.Node, *messages.TenantSettings) {
	t.Helper()
	cfg.Now = clock.Now
	if cfg.HeartbeatTTL == 0 {
		// The clock jumps by hours: with the default TTL every heartbeat would look stale right
		// after a jump, and the health reconciler would ask for replacement capacity behind
		// the sweeps these tests check.
		cfg.HeartbeatTTL = 30 * 24 * time.Hour
	}
	n := testkit.StartNode(t, testkit.NodeOptions{Backend: b, Config: cfg})
	ctx := context.Background()
	ts := &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIdPrefix: "acme-runtime", MaxRuntimeInstances: 1, WorkerCountPerInstance: 2, MaxConcurrentRunsPerInstance: 2}
	if edit != nil {
		edit(ts)
	}
	put, err := n.PutTenant(ctx, ts)
	require.NoError(t, err)
	_, err = n.PutPipeline(ctx, []byte(chain("quick", "echo", 1, "    with: {value: ok}\n")))
	require.NoError(t, err)
	_, err = n.PutPipeline(ctx, []byte(chain("nap", "sleep", 1, "    with: {duration: 1s}\n")))
	require.NoError(t, err)
	return n, put
}

// runToSuccess submits pipeline for tenant and waits for the run to succeed.
func runToSuccess(t *testing.T, n *actors.Node, tenant, pipeline string) *messages.SharedRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: pipeline, Snapshot: tenantSnap(tenant)})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, "run %s: %s", done.SharedRunId, done.FailureReason)
	return done
}

// liveIDs lists the registry's instances whose id starts with prefix.
func liveIDs(t *testing.T, n *actors.Node, prefix string) []string {
	t.Helper()
	list, err := n.ListInstances(context.Background())
	require.NoError(t, err)
	var out []string
	for _, d := range list {
		if d.RuntimeInstanceIdPrefix == prefix {
			out = append(out, d.RuntimeInstanceId)
		}
	}
	return out
}

// waitIdle waits until the registry shows no queued or running run on the instances of prefix
// (an instance publishes its capacity shortly after its run ends).
func waitIdle(t *testing.T, n *actors.Node, prefix string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		list, err := n.ListInstances(context.Background())
		require.NoError(t, err)
		for _, d := range list {
			if d.RuntimeInstanceIdPrefix == prefix && !lifecycle.Idle(d) {
				return false
			}
		}
		return true
	}, "instances of %s still busy", prefix)
}

// waitGone waits until instance id is out of the registry and its actor has stopped.
func waitGone(t *testing.T, n *actors.Node, id string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		_, local := n.LocalInstance(id)
		_, err := n.Store().GetInstance(context.Background(), id)
		return !local && err != nil
	}, "instance %s still running", id)
}

func TestTenantScope_SweepTenants_idleZeroColdStart(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			clock := storetest.NewFakeClock(time.Now())
			n, _ := lifecycleNode(t, b, clock, actors.Config{}, nil)
			ctx := context.Background()

			first := runToSuccess(t, n, "acme", "quick")
			require.Equal(t, "acme-runtime-1", first.AssignedRuntimeInstanceId)
			st, err := n.Store().GetTenantState(ctx, "acme")
			require.NoError(t, err)
			require.NotZero(t, st.EnsuredAt, "the first request ensures the scope")

			clock.Advance(30 * time.Minute)
			rep, err := n.SweepTenants(ctx)
			require.NoError(t, err)
			require.Empty(t, rep.Stopped, "30 minutes idle is not idle enough")
			rec, err := n.Store().GetInstanceRecord(ctx, "acme-runtime-1")
			require.NoError(t, err)
			require.Equal(t, int32(1), rec.Replicas)

			clock.Advance(31 * time.Minute)
			waitIdle(t, n, "acme-runtime")
			rep, err = n.SweepTenants(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"acme"}, rep.ScaledToZero, "%+v", rep)
			require.Equal(t, []string{"acme-runtime-1"}, rep.Stopped)
			waitGone(t, n, "acme-runtime-1")
			rec, err = n.Store().GetInstanceRecord(ctx, "acme-runtime-1")
			require.NoError(t, err, "the record outlives the instance")
			require.Equal(t, int32(0), rec.Replicas)
			require.Equal(t, clock.Now().UnixNano(), rec.ZeroSince)

			// Cold start: Submit waits for capacity, then the run completes.
			second := runToSuccess(t, n, "acme", "quick")
			require.Equal(t, "acme-runtime-1", second.AssignedRuntimeInstanceId)
			rec, err = n.Store().GetInstanceRecord(ctx, "acme-runtime-1")
			require.NoError(t, err)
			require.Equal(t, int32(1), rec.Replicas)
			st, err = n.Store().GetTenantState(ctx, "acme")
			require.NoError(t, err)
			require.Zero(t, st.ScaledToZeroAt)
		})
	}
}

// failingScaler is a scale-out provider that never creates capacity and counts its calls.
type failingScaler struct{ calls atomic.Int32 }

func (f *failingScaler) Name() string { return "never" }

func (f *failingScaler) ScaleOut(_ context.Context, req *messages.ScaleOutRequest) providers.ScaleOutResult {
	f.calls.Add(1)
	return providers.ScaleOutResult{Result: providers.Failure("never", "", providers.OpScaleOut, providers.ReasonHostCreateFailed, true)}
}

func TestTenantScope_Submit_coldStartNoCapacity(t *testing.T) {
	clock := storetest.NewFakeClock(time.Now())
	scaler := &failingScaler{}
	cfg := actors.Config{Providers: []providers.Provider{scaler}, ScaleOutProvider: "never",
		Lifecycle: lifecycle.Config{ColdStartWait: 200 * time.Millisecond}}
	n, _ := lifecycleNode(t, testkit.BackendEmbedded, clock, cfg, nil)
	ctx := context.Background()
	at := clock.Now().Add(-2 * time.Hour).UnixNano()
	require.NoError(t, n.Store().PutTenantState(ctx, &messages.TenantState{TenantId: "acme", EnsuredAt: at, LastSeenAt: at, ScaledToZeroAt: at}))

	start := time.Now()
	_, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "quick", Snapshot: tenantSnap("acme")})
	require.ErrorIs(t, err, actors.ErrNoCapacity)
	require.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "two waits of the cold-start wait")
	require.Equal(t, int32(2), scaler.calls.Load(), "one attempt and exactly one retry")
	runs, err := n.ListRuns(ctx, store.RunFilter{TenantID: "acme"})
	require.NoError(t, err)
	require.Empty(t, runs, "a refused cold start creates no run")
}

func TestTenantScope_SetSuspended_rejectsThenResumeColdStarts(t *testing.T) {
	clock := storetest.NewFakeClock(time.Now())
	n, _ := lifecycleNode(t, testkit.BackendEmbedded, clock, actors.Config{}, nil)
	ctx := context.Background()
	runToSuccess(t, n, "acme", "quick")
	_, err := n.SweepTenants(ctx) // records the live instance
	require.NoError(t, err)
	recs, err := n.Store().ListInstanceRecords(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, recs, 1)

	_, err = n.SetSuspended(ctx, "acme", true)
	require.NoError(t, err)
	_, err = n.Submit(ctx, actors.SubmitRequest{Pipeline: "quick", Snapshot: tenantSnap("acme")})
	require.ErrorIs(t, err, actors.ErrTenantSuspended)
	waitGone(t, n, "acme-runtime-1")
	require.Empty(t, liveIDs(t, n, "acme-runtime"), "no capacity while suspended")
	recs, err = n.Store().ListInstanceRecords(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, recs, "suspension deletes the records")

	_, err = n.SetSuspended(ctx, "acme", false)
	require.NoError(t, err)
	run := runToSuccess(t, n, "acme", "quick")
	require.Equal(t, "acme-runtime-1", run.AssignedRuntimeInstanceId)
}

func TestTenantScope_WeeklySweep_onlyOldZeroRecords(t *testing.T) {
	clock := storetest.NewFakeClock(time.Now())
	n, _ := lifecycleNode(t, testkit.BackendEmbedded, clock, actors.Config{}, nil)
	ctx := context.Background()
	now := clock.Now()
	day := 24 * time.Hour
	for _, r := range []*messages.InstanceRecord{
		{RuntimeInstanceId: "acme-runtime-1", TenantId: "acme", Replicas: 1},
		{RuntimeInstanceId: "acme-runtime-2", TenantId: "acme", Replicas: 0, ZeroSince: now.Add(-6 * day).UnixNano()},
		{RuntimeInstanceId: "acme-runtime-3", TenantId: "acme", Replicas: 0, ZeroSince: now.Add(-7 * day).UnixNano()},
		{RuntimeInstanceId: "acme-runtime-4", TenantId: "acme", Replicas: 0, ZeroSince: now.Add(-30 * day).UnixNano()},
	} {
		require.NoError(t, n.Store().PutInstanceRecord(ctx, r))
	}
	deleted, err := n.WeeklySweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"acme-runtime-3", "acme-runtime-4"}, deleted)
	recs, err := n.Store().ListInstanceRecords(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, recs, 2)

	clock.Advance(day)
	deleted, err = n.WeeklySweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"acme-runtime-2"}, deleted)
}

func TestTenantScope_PutTenant_scaleInIdleOnly(t *testing.T) {
	clock := storetest.NewFakeClock(time.Now())
	n, ts := lifecycleNode(t, testkit.BackendEmbedded, clock, actors.Config{}, func(s *messages.TenantSettings) {
		s.MaxRuntimeInstances, s.MaxConcurrentRunsPerInstance = 3, 1
	})
	ctx := context.Background()
	for _, id := range []string{"acme-runtime-1", "acme-runtime-2", "acme-runtime-3"} {
		require.NoError(t, n.CreateInstance(ctx, actors.InstanceSpec{ID: id, Settings: ts}))
	}
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return len(liveIDs(t, n, "acme-runtime")) == 3 })

	// Two one-second runs occupy two instances (one run slot each).
	var runIDs []string
	for range 2 {
		run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap", Snapshot: tenantSnap("acme")})
		require.NoError(t, err)
		runIDs = append(runIDs, run.SharedRunId)
	}
	busy := map[string]bool{}
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		list, err := n.ListInstances(ctx)
		require.NoError(t, err)
		clear(busy)
		for _, d := range list {
			if d.RuntimeInstanceIdPrefix == "acme-runtime" && d.RunningRunCount > 0 {
				busy[d.RuntimeInstanceId] = true
			}
		}
		return len(busy) == 2
	}, "two busy instances")

	ts.MaxRuntimeInstances = 1
	_, err := n.PutTenant(ctx, ts)
	require.NoError(t, err)
	var live []string
	testkit.Eventually(t, 15*time.Second, 10*time.Millisecond, func() bool {
		live = liveIDs(t, n, "acme-runtime")
		return len(live) == 2
	}, "only the idle instance stops at once")
	for _, id := range live {
		require.True(t, busy[id], "busy instance %s is kept", id)
	}

	for _, id := range runIDs {
		done, err := n.Await(ctx, id)
		require.NoError(t, err)
		require.Equal(t, messages.RunSucceeded, done.Status)
	}
	// Once idle, the next sweep scales in the rest down to the new maximum.
	waitIdle(t, n, "acme-runtime")
	rep, err := n.SweepTenants(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Stopped, 1)
	require.Empty(t, rep.ScaledToZero)
	waitGone(t, n, rep.Stopped[0])
	require.Len(t, liveIDs(t, n, "acme-runtime"), 1)
}

func TestTenantScope_TouchTenant_throttledLastSeen(t *testing.T) {
	clock := storetest.NewFakeClock(time.Now())
	n, _ := lifecycleNode(t, testkit.BackendEmbedded, clock, actors.Config{}, nil)
	ctx := context.Background()
	lastSeen := func() int64 {
		st, err := n.Store().GetTenantState(ctx, "acme")
		if err != nil {
			return 0
		}
		return st.LastSeenAt
	}
	t0 := clock.Now()
	require.NoError(t, n.TouchTenant(ctx, "acme"))
	testkit.Eventually(t, 15*time.Second, 5*time.Millisecond, func() bool { return lastSeen() == t0.UnixNano() })
	clock.Advance(400 * time.Millisecond)
	require.NoError(t, n.TouchTenant(ctx, "acme")) // within a second: kept in memory only
	clock.Advance(700 * time.Millisecond)
	t2 := clock.Now()
	require.NoError(t, n.TouchTenant(ctx, "acme"))
	testkit.Eventually(t, 15*time.Second, 5*time.Millisecond, func() bool { return lastSeen() == t2.UnixNano() })
}
