package controlplane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

func TestPlaceRun(t *testing.T) {
	live := map[string]bool{"alive-1": true}
	cases := []struct {
		name string
		inst string
		want controlplane.RunPlace
	}{
		{name: "no instance: left to the queue repairs", want: controlplane.RunUnassigned},
		{name: "instance not in the registry: lost", inst: "gone-1", want: controlplane.RunOnLost},
		{name: "live instance: checked, not moved", inst: "alive-1", want: controlplane.RunOnLive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := controlplane.PlaceRun(&messages.SharedRun{AssignedRuntimeInstanceId: tc.inst}, live)
			require.Equal(t, tc.want, got, "place %s", got)
		})
	}
}

func TestTakeForRecovery(t *testing.T) {
	listed := &messages.SharedRun{Status: messages.RunRunning, AssignedRuntimeInstanceId: "lost-1", UpdatedAt: 100}
	cases := []struct {
		name    string
		status  string
		inst    string
		updated int64
		want    bool
	}{
		{name: "running on the lost instance, as listed", status: messages.RunRunning, inst: "lost-1", updated: 100, want: true},
		{name: "dispatched to the lost instance, as listed", status: messages.RunDispatched, inst: "lost-1", updated: 100, want: true},
		{name: "paused on the lost instance, as listed", status: messages.RunPaused, inst: "lost-1", updated: 100, want: true},
		{name: "moved to another instance meanwhile", status: messages.RunRunning, inst: "new-1", updated: 200},
		{name: "requeued meanwhile (an overlapping recovery)", status: messages.RunQueued, inst: "lost-1", updated: 200},
		{name: "finished meanwhile", status: messages.RunSucceeded, inst: "lost-1", updated: 200},
		{name: "running again on a new instance that reuses the lost one's id", status: messages.RunRunning, inst: "lost-1", updated: 300},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := &messages.SharedRun{Status: tc.status, AssignedRuntimeInstanceId: tc.inst, UpdatedAt: tc.updated}
			require.Equal(t, tc.want, controlplane.TakeForRecovery(x, listed))
			require.Equal(t, tc.want, x.Recovery, "marked as a recovery exactly when taken")
		})
	}
}

// backends are the stores the recovery tests run over: the embedded one recovers one run at a
// time, Redis in batches (store.Recovery).
var backends = []struct {
	name string
	open func(t *testing.T) store.Store
}{{"bolt", openStore}, {"redis", openRedisStore}}

// openRedisStore opens a store over a private redis-server for t.
func openRedisStore(t *testing.T) store.Store {
	t.Helper()
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	st, err := redisstore.Open(testCtx(t), redisstore.Options{URL: r.URL(), Prefix: ids.New("t"), Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// runningOn creates run id running on instance inst with its execution there.
func runningOn(t *testing.T, st store.Store, id, inst string) {
	t.Helper()
	ctx := testCtx(t)
	_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: id, TenantId: "acme", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"},
		Status: messages.RunRunning, ExecutionId: "x-" + id, AssignedRuntimeInstanceId: inst})
	require.NoError(t, err)
	require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x-" + id, SharedRunId: id, Epoch: 1, RuntimeInstanceId: inst,
		Status: messages.RunRunning}))
}

// requireRecovered checks that run id was fenced and requeued once as a recovery.
func requireRecovered(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := testCtx(t)
	run, err := st.GetRun(ctx, id)
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status, "run %s", id)
	require.True(t, run.Recovery)
	x, _, err := st.GetExecution(ctx, "x-"+id)
	require.NoError(t, err)
	require.EqualValues(t, 2, x.Epoch, "execution of %s fenced once", id)
	require.Equal(t, []string{messages.KindRecovery}, kinds(t, st, id))
}

// TestRecoverer_Round_recoversLostRunsOverEachBackend: a round fences and requeues every run of
// an instance missing from the registry (more than a batch of them), each once, and leaves the
// runs of live instances alone, whether the store recovers them one at a time or in batches.
func TestRecoverer_Round_recoversLostRunsOverEachBackend(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := b.open(t)
			p := newPlane(t, st)
			require.NoError(t, st.PutInstance(ctx, ready("alive-1", "", 2), time.Minute))
			var lost []string
			for range 70 {
				id := ids.New("lost")
				runningOn(t, st, id, "gone-1")
				lost = append(lost, id)
			}
			runningOn(t, st, "kept", "alive-1")

			require.NoError(t, p.recoverer.Round(ctx, false))
			for _, id := range lost {
				requireRecovered(t, st, id)
			}
			kept, err := st.GetRun(ctx, "kept")
			require.NoError(t, err)
			require.Equal(t, messages.RunRunning, kept.Status)
			pending, _, err := st.QueueDepth(ctx)
			require.NoError(t, err)
			require.EqualValues(t, len(lost), pending)
		})
	}
}

// TestRecoverer_MemberLost_recoversAtOnceWhoeverHoldsTheRecoveryLease: the first control plane
// to learn of a member loss requeues the member's runs at once, although another control
// plane holds the recovery lease (the periodic rounds' lease); a second control plane that
// learns of the same loss leaves the member to the first.
func TestRecoverer_MemberLost_recoversAtOnceWhoeverHoldsTheRecoveryLease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := b.open(t)
			p := newPlane(t, st)
			d := ready("i-m2", "", 2)
			d.NodeId = "m2"
			require.NoError(t, st.PutInstance(ctx, d, time.Minute))
			runningOn(t, st, "r1", "i-m2")
			ok, err := st.AcquireLease(ctx, "recovery", "cp-other", time.Minute)
			require.NoError(t, err)
			require.True(t, ok)

			p.recoverer.MemberLost(ctx, "m2", "n2", true)
			requireRecovered(t, st, "r1")

			runningOn(t, st, "r2", "i-m2") // as if listed too late by the first
			second := newPlaneAs(t, st, "cp-2")
			second.recoverer.MemberLost(ctx, "m2", "n2", true)
			run, err := st.GetRun(ctx, "r2")
			require.NoError(t, err)
			require.Equal(t, messages.RunRunning, run.Status, "the second control plane recovered the member too")
		})
	}
}

// blockingStore holds the first fence of execution id until release is closed, and counts
// the fences of it.
type blockingStore struct {
	store.Store
	id      string
	fenced  chan struct{} // closed at the first fence of id
	release chan struct{}
	mu      sync.Mutex // guards fences
	fences  int
}

func (b *blockingStore) FenceExecution(ctx context.Context, id, owner, from string) (int64, bool, error) {
	if id == b.id {
		b.mu.Lock()
		b.fences++
		first := b.fences == 1
		b.mu.Unlock()
		if first {
			close(b.fenced)
			<-b.release
		}
	}
	return b.Store.FenceExecution(ctx, id, owner, from)
}

// TestRecoverer_Round_skipsRunsItIsRecoveringAlready: a round that finds a lost run which
// another call of the same recoverer (a member loss's recovery) is moving now leaves it to that
// call instead of fencing it a second time.
func TestRecoverer_Round_skipsRunsItIsRecoveringAlready(t *testing.T) {
	ctx := testCtx(t)
	st := &blockingStore{Store: openStore(t), id: "x-r1", fenced: make(chan struct{}), release: make(chan struct{})}
	p := newPlane(t, st)
	runningOn(t, st, "r1", "gone-1")
	first := make(chan error, 1)
	go func() { first <- p.recoverer.Round(ctx, false) }()
	<-st.fenced // the first round is moving r1
	require.NoError(t, p.recoverer.Round(ctx, false))
	close(st.release)
	require.NoError(t, <-first)
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, 1, st.fences, "r1 fenced by both rounds")
	requireRecovered(t, st, "r1")
}

// TestRecoverer_oldListingSparesARunBackOnAReusedInstanceID: a recovery works from a listing
// of runs on the lost instance gone-1 made before another control plane moved one of them,
// which then started again on a new instance that reuses the id gone-1. The run looks as it
// did (running on gone-1), but it changed since the listing: the late recovery must neither
// fence its new activation nor requeue it.
func TestRecoverer_oldListingSparesARunBackOnAReusedInstanceID(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := b.open(t)
			p := newPlane(t, st)
			runningOn(t, st, "r1", "gone-1")
			listed, err := st.GetRun(ctx, "r1")
			require.NoError(t, err)

			other := newPlaneAs(t, st, "cp-2")
			controlplane.RecoverLost(ctx, other.recoverer, []*messages.SharedRun{listed})
			requireRecovered(t, st, "r1")
			_, err = st.UpdateRun(ctx, "r1", func(r *messages.SharedRun) error {
				r.Status, r.AssignedRuntimeInstanceId = messages.RunRunning, "gone-1" // the new gone-1
				return nil
			})
			require.NoError(t, err)
			live, err := st.AcquireExecution(ctx, "x-r1", "node-2", "gone-1")
			require.NoError(t, err)

			controlplane.RecoverLost(ctx, p.recoverer, []*messages.SharedRun{listed})
			x, _, err := st.GetExecution(ctx, "x-r1")
			require.NoError(t, err)
			require.Equal(t, live, x.Epoch, "the new activation was fenced")
			run, err := st.GetRun(ctx, "r1")
			require.NoError(t, err)
			require.Equal(t, messages.RunRunning, run.Status, "the run was requeued again")
		})
	}
}
