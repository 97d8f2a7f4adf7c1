package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// finishedRun starts a node, runs one run of napSteps to the end and returns the node and that
// run (which names the node's live instance).
func finishedRun(t *testing.T, ctx context.Context) (*actors.Node, *messages.SharedRun) {
	t.Helper()
	return finishedRunOf(t, ctx, napSteps, "naps")
}

// finishedRunOf is finishedRun of pipeline src (keyed key).
func finishedRunOf(t *testing.T, ctx context.Context, src, key string) (*actors.Node, *messages.SharedRun) {
	t.Helper()
	n := testkit.StartNode(t, testkit.NodeOptions{})
	_, err := n.PutPipeline(ctx, []byte(src))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: key, Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	return n, done
}

// like returns a fresh run record of the same pipeline and tenant as tmpl, in status.
func like(tmpl *messages.SharedRun, id, status, instance string) *messages.SharedRun {
	r := proto.Clone(tmpl).(*messages.SharedRun)
	r.SharedRunId, r.Status, r.AssignedRuntimeInstanceId = id, status, instance
	r.ExecutionId, r.LocalRunId, r.IdempotencyKey, r.FailureReason = "", "", "", ""
	r.CreatedAt, r.UpdatedAt, r.Attempts = 0, 0, 1
	return r
}

// TestNode_lostDispatchIsRequeued: a pump marked a run dispatched to a live instance, reserved
// its slot and died before delivering it (the queue item was acked). The instance never
// extends a hold on a run it does not have, so the recovery coordinator requeues the run a few
// heartbeats later (well before the hold lapses), and it runs once.
func TestNode_lostDispatchIsRequeued(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, first := finishedRun(t, ctx)
	st := n.Store()
	inst := first.AssignedRuntimeInstanceId
	_, created, err := st.CreateRun(ctx, like(first, "lost-dispatch", messages.RunDispatched, inst))
	require.NoError(t, err)
	require.True(t, created)
	// The pump's hold, at the default TTL: recovery must not wait for it to lapse.
	ok, err := st.Reserve(ctx, inst, "lost-dispatch", 100, 30*time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	actx, acancel := context.WithTimeout(ctx, 10*time.Second) // < the 30 s hold
	defer acancel()
	done, err := n.Await(actx, "lost-dispatch")
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	_, entries, err := n.Ledger(ctx, "lost-dispatch", 0)
	require.NoError(t, err)
	lost, started := 0, 0
	for _, e := range entries {
		switch {
		case e.Kind == messages.KindDispatchFailed && e.Reason == "dispatch-lost":
			lost++
		case e.Kind == messages.KindExecutionStarted:
			started++
		}
	}
	require.Equal(t, 1, lost, "one dispatch-lost requeue")
	require.Equal(t, 1, started, "one execution")
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		n, err := st.ReservationCount(ctx, inst)
		return err == nil && n == 0
	}, "no slot of the instance is still held for the run")
}

// TestNode_lateDispatchOfAMovedRunDoesNotRun: a dispatch reaches an instance after the run
// was taken back (requeued, or assigned elsewhere). The instance must not run it: the run
// record, not the message, says where the run belongs. A pipeline that starts with a pure step
// queues its execution's start on the embedded store and runs that step meanwhile: the refused
// start takes the step's commits down with it, and nothing of the run is written.
func TestNode_lateDispatchOfAMovedRunDoesNotRun(t *testing.T) {
	for _, tc := range []struct{ name, src, key string }{
		{"sleep", napSteps, "naps"},
		{"pure first step", "key: pures\nsteps:\n  - {id: a, uses: echo, with: {value: 1}}\n  - {id: b, uses: sleep, needs: [a]}\n", "pures"},
	} {
		t.Run(tc.name, func(t *testing.T) { lateDispatchOfAMovedRun(t, tc.src, tc.key) })
	}
}

func lateDispatchOfAMovedRun(t *testing.T, src, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, first := finishedRunOf(t, ctx, src, key)
	st := n.Store()
	inst := first.AssignedRuntimeInstanceId
	d, err := st.GetInstance(ctx, inst)
	require.NoError(t, err)
	// A second live instance holds "elsewhere" (so recovery leaves it alone).
	require.NoError(t, n.CreateInstance(ctx, actors.InstanceSpec{ID: "other-1", Settings: tenancy.Normalize(tenancy.Defaults("acme"))}))
	ok, err := st.Reserve(ctx, "other-1", "elsewhere", 100, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	moved := []*messages.SharedRun{
		like(first, "requeued", messages.RunQueued, inst),
		like(first, "elsewhere", messages.RunDispatched, "other-1"),
	}
	before := fencedCount(t, n)
	for _, r := range moved {
		_, _, err := st.CreateRun(ctx, r)
		require.NoError(t, err)
		res := n.Providers().Dispatch(ctx, d, &messages.DispatchRequest{RuntimeInstanceId: inst, SharedRunId: r.SharedRunId,
			PipelineKey: r.Pipeline, PipelineHash: r.PipelineHash, Input: r.Input, Snapshot: r.Snapshot, Source: "test-late"})
		require.True(t, res.Ok, res.Reason) // the instance takes the message; its execution declines
	}
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		return fencedCount(t, n) >= before+2
	}, "both activations stopped")
	for _, want := range moved {
		got, err := st.GetRun(ctx, want.SharedRunId)
		require.NoError(t, err)
		require.Equal(t, want.Status, got.Status, want.SharedRunId)
		require.Equal(t, want.AssignedRuntimeInstanceId, got.AssignedRuntimeInstanceId, want.SharedRunId)
		require.Empty(t, got.ExecutionId, want.SharedRunId)
	}
	execs, err := st.ListExecutionsByInstance(ctx, inst)
	require.NoError(t, err)
	for _, x := range execs {
		require.Equal(t, first.SharedRunId, x.SharedRunId, "an execution of a moved run is left on the instance")
	}
	for _, want := range moved {
		entries, err := st.ReadLedger(ctx, want.SharedRunId, 0, 0)
		require.NoError(t, err)
		require.Empty(t, entries, "the moved run %s has ledger entries", want.SharedRunId)
	}
}

// fencedCount reads dair_executions_fenced_total.
func fencedCount(t *testing.T, n *actors.Node) float64 {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "dair_executions_fenced_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// TestNode_runWaitingInALocalQueueIsNotTakenForLost: runs that wait in an instance's local
// queue (dispatched, not yet running) for many heartbeats keep their holds extended, so the
// lost-dispatch check leaves them alone.
func TestNode_runWaitingInALocalQueueIsNotTakenForLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := testkit.StartNode(t, testkit.NodeOptions{})
	_, err := n.PutPipeline(ctx, []byte(napSteps))
	require.NoError(t, err)
	// One worker, four run slots: the later runs wait in the local queue (up to 1.8 s).
	_, err = n.PutTenant(ctx, &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIdPrefix: "acme-runtime", MaxRuntimeInstances: 1, WorkerCountPerInstance: 1,
		MaxConcurrentRunsPerInstance: 4, LocalQueueCapacity: 10})
	require.NoError(t, err)
	var ids []string
	for range 4 {
		run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "naps", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}})
		require.NoError(t, err)
		ids = append(ids, run.SharedRunId)
	}
	for _, id := range ids {
		done, err := n.Await(ctx, id)
		require.NoError(t, err)
		require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
		_, entries, err := n.Ledger(ctx, id, 0)
		require.NoError(t, err)
		started := 0
		for _, e := range entries {
			require.NotEqual(t, "dispatch-lost", e.Reason, "run %s taken for lost while queued on its instance", id)
			if e.Kind == messages.KindExecutionStarted {
				started++
			}
		}
		require.Equal(t, 1, started, id)
	}
}

// TestNode_restartReleasesItsPumpsClaims: a node's pump claimed a queue item and the process
// died with it. Restarted under the same node id, the node takes the item back at once
// instead of waiting out the claim's visibility timeout (an hour here).
func TestNode_restartReleasesItsPumpsClaims(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testkit.OpenStore(t, testkit.BackendEmbedded, nil)
	cfg := actors.Config{NodeID: "n1", Store: st, PumpInterval: 10 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
		RecoveryInterval: 100 * time.Millisecond}
	n, err := actors.Start(ctx, cfg)
	require.NoError(t, err)
	_, err = n.PutPipeline(ctx, []byte(napSteps))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "naps", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}})
	require.NoError(t, err)
	tmpl, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.NoError(t, n.Stop(ctx))

	_, _, err = st.CreateRun(ctx, like(tmpl, "claimed", messages.RunQueued, ""))
	require.NoError(t, err)
	require.NoError(t, st.Enqueue(ctx, "claimed"))
	claims, err := st.Claim(ctx, "pump-n1", 10, time.Hour)
	require.NoError(t, err)
	require.Len(t, claims, 1)

	n, err = actors.Start(ctx, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, n.Stop(context.Background())) }()
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	done, err := n.Await(actx, "claimed")
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
}

// TestNode_runningRunWithNoLiveExecutionIsRecovered: a run is running at epoch 1 on an
// instance the registry shows live, with a step started, but no execution of it is alive
// anywhere (its activation stopped without the run being moved; or the instance id now names
// a later incarnation's instance, which never had it). This is the state a chaos run left
// stuck forever (seed 1, CI): recovery only looked at whether the instance was live. The
// instance does not extend a hold on a run it does not have, so recovery fences the execution
// and requeues the run; it resumes with the same ExecutionId at the next epoch.
func TestNode_runningRunWithNoLiveExecutionIsRecovered(t *testing.T) {
	for _, backend := range []testkit.Backend{testkit.BackendEmbedded, testkit.BackendRedis} {
		t.Run(string(backend), func(t *testing.T) {
			if backend == testkit.BackendRedis {
				testkit.RequireRedis(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: backend})
			_, err := n.PutPipeline(ctx, []byte(napSteps))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "naps", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}})
			require.NoError(t, err)
			first, err := n.Await(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunSucceeded, first.Status, first.FailureReason)
			st := n.Store()
			inst := first.AssignedRuntimeInstanceId

			orphan := like(first, "orphan", messages.RunRunning, inst)
			orphan.ExecutionId = "exec-orphan"
			_, created, err := st.CreateRun(ctx, orphan)
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "exec-orphan", SharedRunId: "orphan",
				RuntimeInstanceId: inst, PipelineKey: first.Pipeline, PipelineHash: first.PipelineHash, Epoch: 1,
				Status: messages.RunRunning, Snapshot: first.Snapshot, Input: first.Input, Owner: "gone"}))
			ok, err := st.Reserve(ctx, inst, "orphan", 100, 30*time.Second) // the pump's hold, long before
			require.NoError(t, err)
			require.True(t, ok)

			actx, acancel := context.WithTimeout(ctx, 15*time.Second) // < the 30 s hold
			defer acancel()
			done, err := n.Await(actx, "orphan")
			require.NoError(t, err, "the run stayed %s", runStatus(ctx, n, "orphan"))
			require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
			require.Equal(t, "exec-orphan", done.ExecutionId, "the execution id is kept")
			x, _, err := st.GetExecution(ctx, "exec-orphan")
			require.NoError(t, err)
			require.Greater(t, x.Epoch, int64(1), "fenced: the stale activation can no longer commit")
			_, entries, err := n.Ledger(ctx, "orphan", 0)
			require.NoError(t, err)
			recovered := 0
			for _, e := range entries {
				if e.Kind == messages.KindRecovery && e.Reason == "execution-lost" {
					recovered++
				}
			}
			require.Equal(t, 1, recovered, "one execution-lost recovery")
		})
	}
}

// runStatus is the run's status for a failure message.
func runStatus(ctx context.Context, n *actors.Node, id string) string {
	r, err := n.Store().GetRun(ctx, id)
	if err != nil {
		return err.Error()
	}
	return r.Status
}
