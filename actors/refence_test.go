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

// countedNaps is napSteps with the test's counting handler (300 ms per call) in place of sleep.
const countedNaps = `key: counted-naps
steps:
  - id: a
    uses: nap
  - id: b
    uses: nap
    needs: [a]
`

// TestNode_wronglyRecoveredRunComesBackToItsInstance: a recovery round that took a live
// instance for lost (its heartbeat was late) fences the run's execution and requeues the run;
// the pump gives it straight back to the same instance while the fenced execution is still
// stopping. The run must still finish, with the same ExecutionId, each step succeeded once;
// the fenced activation adds no step record, ledger entry or handler call after the fence
// (beyond the attempt in flight at the fence), counted by the test's own handler.
func TestNode_wronglyRecoveredRunComesBackToItsInstance(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			c := newCounter()
			c.delay = 300 * time.Millisecond
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: b, Config: actors.Config{Handlers: registryWith(t, "nap", c)}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(countedNaps))
			require.NoError(t, err)
			snap := &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "counted-naps", Snapshot: snap})
			require.NoError(t, err)
			st := n.Store()
			var running *messages.SharedRun
			testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
				r, err := st.GetRun(ctx, run.SharedRunId)
				running = r
				return err == nil && r.Status == messages.RunRunning
			}, "the run is running")

			// The wrongful recovery, as recoverRun does it: fence, requeue.
			x, _, err := st.GetExecution(ctx, running.ExecutionId)
			require.NoError(t, err)
			epoch, fenced, err := st.FenceExecution(ctx, running.ExecutionId, "recovery:test", running.AssignedRuntimeInstanceId)
			require.NoError(t, err)
			require.True(t, fenced)
			require.Equal(t, x.Epoch+1, epoch)
			mark := markFence(t, n, run.SharedRunId, running.ExecutionId, x.Epoch, c.callsCopy)
			require.NotEqual(t, messages.StepSucceeded, mark.steps["b"].GetStatus(), "the run finished before the fence; the test proves nothing")
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
			// Both activations have stopped: nothing can be added after this point.
			testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
				d, err := st.GetInstance(ctx, running.AssignedRuntimeInstanceId)
				return err == nil && d.RunningRunCount == 0
			}, "no execution left on the instance")
			_, entries, err := n.Ledger(ctx, done.ExecutionId, 0)
			require.NoError(t, err)
			require.Equal(t, map[string]int{"a": 1, "b": 1}, succeededPerStep(entries))
			mark.requireNothingAdded(t, n, map[string][]string{"a": nil, "b": {"a"}}, 1, c.callsCopy())
		})
	}
}
