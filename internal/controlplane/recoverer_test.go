package controlplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// TestRecoverer_RecoverRun_oldViewDoesNotFenceTheReplacement: two recovery rounds overlap (the
// first outlived its lease); the second works from the run as it was listed before the first
// moved it. The second must neither fence the activation that replaced the lost one nor
// requeue the run, or the run is left running nowhere.
func TestRecoverer_RecoverRun_oldViewDoesNotFenceTheReplacement(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)

	snap := &messages.ExecutionContextSnapshot{TenantId: "acme"}
	_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Snapshot: snap, Status: messages.RunRunning,
		ExecutionId: "x1", AssignedRuntimeInstanceId: "lost-1"})
	require.NoError(t, err)
	require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1, RuntimeInstanceId: "lost-1",
		Status: messages.RunRunning}))
	oldView, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)

	// Round one moves the run: fenced, requeued; the pump then starts it on new-1.
	require.NoError(t, p.recoverer.RecoverRun(ctx, oldView, "runtime-instance-lost"))
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
	require.NoError(t, p.recoverer.RecoverRun(ctx, oldView, "runtime-instance-lost"))
	x, _, err := st.GetExecution(ctx, "x1")
	require.NoError(t, err)
	require.Equal(t, live, x.Epoch, "the replacement activation was fenced")
	require.Equal(t, "new-1", x.RuntimeInstanceId)
	run, err = st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, run.Status)
	require.Equal(t, "new-1", run.AssignedRuntimeInstanceId)
}

// TestRecoverer_Round_requeuesRunsOfLostInstances: a round fences and requeues the runs of an
// instance missing from the registry and leaves the runs of live instances alone.
func TestRecoverer_Round_requeuesRunsOfLostInstances(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	require.NoError(t, st.PutInstance(ctx, ready("alive-1", "", 2), time.Minute))
	for _, r := range []*messages.SharedRun{
		{SharedRunId: "lost", Status: messages.RunRunning, ExecutionId: "x-lost", AssignedRuntimeInstanceId: "gone-1"},
		{SharedRunId: "kept", Status: messages.RunRunning, ExecutionId: "x-kept", AssignedRuntimeInstanceId: "alive-1"},
	} {
		r.TenantId, r.Snapshot = "acme", &messages.ExecutionContextSnapshot{TenantId: "acme"}
		_, _, err := st.CreateRun(ctx, r)
		require.NoError(t, err)
		require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: r.ExecutionId, SharedRunId: r.SharedRunId, Epoch: 1,
			RuntimeInstanceId: r.AssignedRuntimeInstanceId, Status: messages.RunRunning}))
	}

	require.NoError(t, p.recoverer.Round(ctx, true))
	lost, err := st.GetRun(ctx, "lost")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, lost.Status)
	require.True(t, lost.Recovery)
	x, _, err := st.GetExecution(ctx, "x-lost")
	require.NoError(t, err)
	require.EqualValues(t, 2, x.Epoch, "the lost execution is fenced")
	require.Equal(t, []string{messages.KindRecovery}, kinds(t, st, "lost"))
	kept, err := st.GetRun(ctx, "kept")
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, kept.Status)
	pending, _, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, pending)
}

// TestRecoverer_RecoverLostDispatch: a run marked dispatched whose hold the instance never
// extended is requeued once two heartbeats have passed; a run whose hold was extended is not.
func TestRecoverer_RecoverLostDispatch(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	for _, id := range []string{"never-received", "received"} {
		_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: id, TenantId: "acme", Status: messages.RunDispatched, Attempts: 1,
			AssignedRuntimeInstanceId: "i1", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
		require.NoError(t, err)
		ok, err := st.Reserve(ctx, "i1", id, 4, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
	}
	received, err := st.GetRun(ctx, "received")
	require.NoError(t, err)
	lost, err := st.GetRun(ctx, "never-received")
	require.NoError(t, err)
	require.NoError(t, p.recoverer.RecoverLostDispatch(ctx, lost))
	run, err := st.GetRun(ctx, "never-received")
	require.NoError(t, err)
	require.Equal(t, messages.RunDispatched, run.Status, "requeued before two heartbeats passed")

	time.Sleep(600 * time.Millisecond) // past two heartbeats (1 ms) and the clock slack (500 ms)
	require.NoError(t, st.RefreshReservations(ctx, "i1", []string{"received"}, 2*time.Minute))
	require.NoError(t, p.recoverer.RecoverLostDispatch(ctx, lost))
	require.NoError(t, p.recoverer.RecoverLostDispatch(ctx, received))
	run, err = st.GetRun(ctx, "never-received")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status)
	require.Equal(t, "dispatch-lost", run.FailureReason)
	run, err = st.GetRun(ctx, "received")
	require.NoError(t, err)
	require.Equal(t, messages.RunDispatched, run.Status)
}

// TestRecoverer_MemberLost_tombstonesTheMember: a lost member's instances leave the registry and
// cannot come back; its pump's claims are released.
func TestRecoverer_MemberLost_tombstonesTheMember(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	d := ready("i1", "", 1)
	d.NodeId = "m2"
	require.NoError(t, st.PutInstance(ctx, d, time.Minute))
	queued(t, st, "r1", "acme")
	_, err := st.Claim(ctx, "pump-n2", 10, time.Minute)
	require.NoError(t, err)

	p.recoverer.MemberLost(ctx, "m2", "n2", false)
	_, err = st.GetInstance(ctx, "i1")
	require.ErrorIs(t, err, store.ErrNotFound)
	err = st.PutInstance(ctx, d, time.Minute)
	require.True(t, errors.Is(err, store.ErrMemberDead), "a dead member re-published its instance: %v", err)
	pending, claimed, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, pending)
	require.Zero(t, claimed)
}

// TestRecoverer_Round_recoversRunsTheirLiveInstanceNoLongerHolds: a run running on a live
// instance that does not extend its hold (no execution of it is alive there) is fenced and
// requeued after its hold was found stale over two rounds; a run whose hold the instance keeps
// extending is left alone.
func TestRecoverer_Round_recoversRunsTheirLiveInstanceNoLongerHolds(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	require.NoError(t, st.PutInstance(ctx, ready("alive-1", "", 4), time.Minute))
	for _, id := range []string{"orphan", "held"} {
		_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: id, TenantId: "acme", Status: messages.RunRunning, ExecutionId: "x-" + id,
			AssignedRuntimeInstanceId: "alive-1", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
		require.NoError(t, err)
		require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x-" + id, SharedRunId: id, Epoch: 1,
			RuntimeInstanceId: "alive-1", Status: messages.RunRunning}))
		ok, err := st.Reserve(ctx, "alive-1", id, 4, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, p.recoverer.Round(ctx, false))
	orphan, err := st.GetRun(ctx, "orphan")
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, orphan.Status, "recovered while its hold was fresh")

	deadline := time.Now().Add(5 * time.Second)
	for orphan.Status == messages.RunRunning && time.Now().Before(deadline) {
		require.NoError(t, st.RefreshReservations(ctx, "alive-1", []string{"held"}, time.Minute)) // the instance's heartbeat
		require.NoError(t, p.recoverer.Round(ctx, false))
		orphan, err = st.GetRun(ctx, "orphan")
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond) // a heartbeat of the simulated instance
	}
	require.Equal(t, messages.RunQueued, orphan.Status)
	require.True(t, orphan.Recovery)
	x, _, err := st.GetExecution(ctx, "x-orphan")
	require.NoError(t, err)
	require.EqualValues(t, 2, x.Epoch, "the lost execution is fenced")
	require.Equal(t, []string{messages.KindRecovery}, kinds(t, st, "orphan"))
	held, err := st.GetRun(ctx, "held")
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, held.Status)
	x, _, err = st.GetExecution(ctx, "x-held")
	require.NoError(t, err)
	require.EqualValues(t, 1, x.Epoch)
}

// enqueueWatch is a store whose Enqueue records whether the run's ledger already held a
// recovery entry when the run became claimable.
type enqueueWatch struct {
	store.Store
	t          *testing.T
	entryFirst map[string]bool
}

func (s *enqueueWatch) Enqueue(ctx context.Context, id string) error {
	s.watch(id)
	return s.Store.Enqueue(ctx, id)
}

func (s *enqueueWatch) EnqueueFront(ctx context.Context, id string) error {
	s.watch(id)
	return s.Store.EnqueueFront(ctx, id)
}

func (s *enqueueWatch) watch(id string) {
	entries, err := s.ReadLedger(context.Background(), id, 0, 100)
	require.NoError(s.t, err)
	for _, e := range entries {
		if e.Kind == messages.KindRecovery {
			s.entryFirst[id] = true
		}
	}
}

// TestRecoverer_RecoverRun_entryPrecedesTheRequeue: the recovery entry is in the run's ledger
// before the run can be claimed again; written after, it could follow the entries of the next
// activation at a higher epoch (dair chaos seed 2: "recovery at epoch 2 after epoch 3").
func TestRecoverer_RecoverRun_entryPrecedesTheRequeue(t *testing.T) {
	ctx := testCtx(t)
	st := &enqueueWatch{Store: openStore(t), t: t, entryFirst: map[string]bool{}}
	p := newPlane(t, st)
	_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Status: messages.RunRunning, ExecutionId: "x1",
		AssignedRuntimeInstanceId: "lost-1", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	require.NoError(t, err)
	require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1, RuntimeInstanceId: "lost-1",
		Status: messages.RunRunning}))
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.NoError(t, p.recoverer.RecoverRun(ctx, run, "runtime-instance-lost"))
	require.True(t, st.entryFirst["r1"], "the run was claimable before its recovery entry was written")
	require.Equal(t, []string{messages.KindRecovery}, kinds(t, st, "r1"))
}

// cancelAfterFence is a store that cancels its caller's context once a fence is written: the
// node running the round stops right then.
type cancelAfterFence struct {
	store.Store
	cancel context.CancelFunc
}

func (s *cancelAfterFence) FenceExecution(ctx context.Context, id, owner, fromInstance string) (int64, bool, error) {
	ep, ok, err := s.Store.FenceExecution(ctx, id, owner, fromInstance)
	s.cancel()
	return ep, ok, err
}

// TestRecoverer_RecoverRun_requeueOutlivesACancelledRound: a round cancelled between the fence
// and the requeue (its node stopped: dair chaos, "requeue run: ... context canceled") must still
// requeue the run, or the run stays running on a live instance with a fenced execution.
func TestRecoverer_RecoverRun_requeueOutlivesACancelledRound(t *testing.T) {
	ctx := testCtx(t)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &cancelAfterFence{Store: openStore(t), cancel: cancel}
	p := newPlane(t, st)
	_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Status: messages.RunRunning, ExecutionId: "x1",
		AssignedRuntimeInstanceId: "lost-1", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	require.NoError(t, err)
	require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1, RuntimeInstanceId: "lost-1",
		Status: messages.RunRunning}))
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.NoError(t, p.recoverer.RecoverRun(rctx, run, "runtime-instance-lost"))
	run, err = st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status, "fenced, but left running")
	pending, _, err := st.QueueDepth(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, pending)
}

// TestRecoverer_RecoverRun_goesAheadOfTheRunsQueuedAfterIt: a recovered run had its turn (it
// was dispatched); it is claimed before the runs that waited behind it, else under a tenant's
// concurrency quota a newer run takes the slot of the run that was executing (probe: a restart
// left the run that was mid-step waiting for a newer run's whole duration).
func TestRecoverer_RecoverRun_goesAheadOfTheRunsQueuedAfterIt(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	p := newPlane(t, st)
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme"}
	_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "acme", Status: messages.RunRunning, ExecutionId: "x1",
		AssignedRuntimeInstanceId: "lost-1", Snapshot: snap})
	require.NoError(t, err)
	require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1, RuntimeInstanceId: "lost-1",
		Status: messages.RunRunning}))
	_, _, err = st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r2", TenantId: "acme", Status: messages.RunQueued, Snapshot: snap})
	require.NoError(t, err)
	require.NoError(t, st.Enqueue(ctx, "r2"))
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.NoError(t, p.recoverer.RecoverRun(ctx, run, "runtime-instance-lost"))
	claims, err := st.Claim(ctx, "pump", 10, time.Minute)
	require.NoError(t, err)
	var order []string
	for _, c := range claims {
		order = append(order, c.RunID)
	}
	require.Equal(t, []string{"r1", "r2"}, order)
}
