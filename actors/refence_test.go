package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

const napSteps = `key: naps
steps:
  - id: a
    uses: sleep
    with: {duration: 300ms}
  - id: b
    uses: sleep
    needs: [a]
    with: {duration: 300ms}
`

// TestNode_wronglyRecoveredRunComesBackToItsInstance: a recovery round that took a live
// instance for lost (its heartbeat was late) fences the run's execution and requeues the run;
// the pump gives it straight back to the same instance while the fenced execution is still
// stopping. The run must still finish, once per step, with the same ExecutionId.
func TestNode_wronglyRecoveredRunComesBackToItsInstance(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(napSteps))
	require.NoError(t, err)
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "naps", Snapshot: snap})
	require.NoError(t, err)
	st := n.Store()
	var running *messages.SharedRun
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		r, err := st.GetRun(ctx, run.SharedRunId)
		running = r
		return err == nil && r.Status == messages.RunRunning
	}, "the run is running")

	// The wrongful recovery, as recoverRun does it: fence, requeue.
	_, fenced, err := st.FenceExecution(ctx, running.ExecutionId, "recovery:test", running.AssignedRuntimeInstanceId)
	require.NoError(t, err)
	require.True(t, fenced)
	_, err = st.UpdateRun(ctx, run.SharedRunId, func(r *messages.SharedRun) error {
		r.Status, r.Recovery = messages.RunQueued, true
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, st.ReleaseReservation(ctx, running.AssignedRuntimeInstanceId, run.SharedRunId))
	require.NoError(t, st.Enqueue(ctx, run.SharedRunId))

	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	require.Equal(t, running.ExecutionId, done.ExecutionId)
	_, entries, err := n.Ledger(ctx, done.ExecutionId, 0)
	require.NoError(t, err)
	succeeded := map[string]int{}
	for _, e := range entries {
		if e.Kind == messages.KindStepSucceeded {
			succeeded[e.StepId]++
		}
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1}, succeeded)
}
