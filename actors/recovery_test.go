package actors

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// TestRecoverRun_oldViewDoesNotFenceTheReplacement: two recovery rounds overlap (the first
// outlived its lease); the second works from the run as it was listed before the first moved
// it. The second must neither fence the activation that replaced the lost one nor requeue the
// run, or the run is left running nowhere.
func TestRecoverRun_oldViewDoesNotFenceTheReplacement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db")})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	e := &env{nodeID: "cp", incarnation: "cp-1", st: st, log: zap.NewNop(), hub: NewHub(), metrics: NewMetrics(), now: time.Now}
	e.commits = newCommitter(st, e.log, e.hub, 1, 16)
	defer e.commits.close()
	c := &core{env: e}

	snap := &messages.ExecutionContextSnapshot{TenantId: "acme"}
	_, _, err = st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Snapshot: snap, Status: messages.RunRunning,
		ExecutionId: "x1", AssignedRuntimeInstanceId: "lost-1"})
	require.NoError(t, err)
	require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1, RuntimeInstanceId: "lost-1",
		Status: messages.RunRunning}))
	oldView, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)

	// Round one moves the run: fenced, requeued; the pump then starts it on new-1.
	require.NoError(t, c.recoverRun(ctx, oldView, "runtime-instance-lost"))
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status)
	require.True(t, run.Recovery)
	_, err = st.UpdateRun(ctx, "r1", func(r *messages.SharedRun) error {
		r.Status, r.AssignedRuntimeInstanceId = messages.RunRunning, "new-1"
		return nil
	})
	require.NoError(t, err)
	live, err := st.AcquireExecution(ctx, "x1", "node-2", "new-1")
	require.NoError(t, err)

	// Round two, from the old view.
	require.NoError(t, c.recoverRun(ctx, oldView, "runtime-instance-lost"))
	x, _, err := st.GetExecution(ctx, "x1")
	require.NoError(t, err)
	require.Equal(t, live, x.Epoch, "the replacement activation was fenced")
	require.Equal(t, "new-1", x.RuntimeInstanceId)
	run, err = st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, run.Status)
	require.Equal(t, "new-1", run.AssignedRuntimeInstanceId)
}

// TestStartableHere: an execution starts only for a run its instance still holds.
func TestStartableHere(t *testing.T) {
	for _, tc := range []struct {
		name, status, assigned string
		ok                     bool
	}{
		{"dispatched here", messages.RunDispatched, "i1", true},
		{"running here (restart)", messages.RunRunning, "i1", true},
		{"paused here", messages.RunPaused, "i1", true},
		{"finished: nothing to change", messages.RunSucceeded, "i2", true},
		{"dispatched elsewhere", messages.RunDispatched, "i2", false},
		{"running elsewhere", messages.RunRunning, "i2", false},
		{"requeued", messages.RunQueued, "i1", false},
		{"parked for scale-out", messages.RunScaleOutRequested, "i1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startableHere(&messages.SharedRun{Status: tc.status, AssignedRuntimeInstanceId: tc.assigned}, "i1")
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errRunMoved)
			}
		})
	}
}

// staleCounts is the store as a pump sees it when another dispatch takes an instance's last
// slot between the pump's reservation count and its Reserve call: every count reads 0.
type staleCounts struct{ store.Store }

func (staleCounts) ReservationCount(context.Context, string) (int, error) { return 0, nil }

// TestDispatchRun_slotLostToAConcurrentDispatch: the pump chose an instance whose last slot a
// parallel dispatch took first. The instance is full, not gone: the run waits (recorded once,
// reason no-free-slot) instead of asking for a scale-out that the tenant's maximum refuses.
func TestDispatchRun_slotLostToAConcurrentDispatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db")})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	e := &env{nodeID: "cp", incarnation: "cp-1", st: staleCounts{st}, log: zap.NewNop(), hub: NewHub(), metrics: NewMetrics(), now: time.Now}
	e.cfg.ReservationTTL, e.cfg.HeartbeatTTL = time.Minute, 5*time.Second
	e.commits = newCommitter(st, e.log, e.hub, 1, 16)
	defer e.commits.close()
	c := &core{env: e, tenants: newTTLCache[*messages.TenantSettings](time.Second), circuits: newCircuits()}

	acme := &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: "acme-runtime",
		MaxRuntimeInstances: 1, WorkerCountPerInstance: 4, MaxConcurrentRunsPerInstance: 1, LocalQueueCapacity: 10}
	require.NoError(t, st.PutTenant(ctx, acme))
	inst := &messages.CapacityDescriptor{RuntimeInstanceId: "acme-runtime-1", Status: messages.InstanceReady, WorkerCount: 4,
		AvailableWorkerCount: 4, MaxConcurrentRuns: 1, AvailableRunSlots: 1, QueueCapacity: 10, CanAcceptRun: true,
		TenantId: "acme", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: "acme-runtime", MaxRuntimeInstances: 1,
		LastHeartbeatAt: time.Now().UnixNano(), Roles: []string{"runtime"}}
	require.NoError(t, st.PutInstance(ctx, inst, time.Minute))
	ok, err := st.Reserve(ctx, "acme-runtime-1", "other", 1, time.Minute) // the parallel dispatch's slot
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Status: messages.RunQueued,
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	require.NoError(t, err)

	for cycle := 0; cycle < 3; cycle++ {
		out, err := c.dispatchRun(ctx, "r1", "pump-cp", nil)
		require.NoError(t, err)
		require.Equal(t, outcomeRequeue, out, "cycle %d", cycle)
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
