package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

const failFanPipeline = `key: fail-fan
steps:
  - {id: a, uses: echo, with: {value: x}}
  - {id: boom, uses: fail, needs: [a], with: {times: 9}}
  - {id: slow, uses: sleep, needs: [a], with: {duration: 1h}}
  - {id: after-boom, uses: echo, needs: [boom], with: {value: y}}
  - {id: after-slow, uses: echo, needs: [slow], with: {value: z}}
`

// A step that fails with no attempts left fails the run fast: the attempt in flight on the
// other branch is cancelled, and the steps that never started are committed as skipped, each
// with a step_skipped entry, before the run's terminal entry.
func TestExecution_terminalFailureSkipsWhatNeverStarted(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: b, Config: actors.Config{Handlers: registryWith(t, "count", newCounter())}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(failFanPipeline))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "fail-fan", Snapshot: tenantSnap("acme")})
			require.NoError(t, err)
			done, err := n.Await(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunFailed, done.Status)
			require.Equal(t, "step boom failed", done.FailureReason)

			_, steps, err := n.Store().GetExecution(ctx, done.ExecutionId)
			require.NoError(t, err)
			status := map[string]string{}
			for _, st := range steps {
				status[st.StepId] = st.Status
			}
			require.Equal(t, map[string]string{
				"a": messages.StepSucceeded, "boom": messages.StepFailed, "slow": messages.StepRunning,
				"after-boom": messages.StepSkipped, "after-slow": messages.StepSkipped,
			}, status)

			_, entries := ledgerKinds(t, n, run.SharedRunId)
			var skipped []string
			terminal := -1
			for i, e := range entries {
				switch e.Kind {
				case messages.KindStepSkipped:
					require.Equal(t, -1, terminal, "step_skipped after the run's terminal entry")
					require.Equal(t, "step boom failed", e.Reason)
					skipped = append(skipped, e.StepId)
				case messages.KindRunFailed:
					terminal = i
				}
			}
			require.ElementsMatch(t, []string{"after-boom", "after-slow"}, skipped)
			require.NotEqual(t, -1, terminal, "no run_failed entry")
		})
	}
}

// A step that runs past its timeout is retried, and the failure says it timed out.
func TestExecution_stepTimeoutIsRetried(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(`key: slow
steps:
  - {id: nap, uses: sleep, with: {duration: 1h}, timeout: 50ms, retry: {max_attempts: 2, backoff: 10ms}}
`))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "slow", Snapshot: tenantSnap("acme")})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunFailed, done.Status)
	_, entries := ledgerKinds(t, n, run.SharedRunId)
	var failed []*messages.LedgerEntry
	for _, e := range entries {
		if e.Kind == messages.KindStepFailed {
			failed = append(failed, e)
		}
	}
	require.Len(t, failed, 2)
	for i, e := range failed {
		require.Equal(t, int32(i+1), e.Attempt)
		require.Contains(t, e.Reason, "timed out after 50ms")
	}
}

// A commit refused for a stale epoch stops the execution at once: after another owner takes
// the execution over, no step beyond the one in flight is started here (the store would refuse
// their commits too, so this is what shows that the answer was heeded).
func TestExecution_fencedCommitStartsNothingMore(t *testing.T) {
	c := newCounter()
	c.delay = 30 * time.Millisecond
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{Handlers: registryWith(t, "count", c), RecoveryInterval: time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(chain("fence-me", "count", 12, "")))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "fence-me", Snapshot: tenantSnap("acme")})
	require.NoError(t, err)
	var execID string
	testkit.Eventually(t, 10*time.Second, 2*time.Millisecond, func() bool {
		r, err := n.GetRun(ctx, run.SharedRunId)
		require.NoError(t, err)
		execID = r.ExecutionId
		_, entries := ledgerKinds(t, n, run.SharedRunId)
		return len(succeededPerStep(entries)) >= 2
	}, "two steps committed")
	_, err = n.Store().AcquireExecution(ctx, execID, "someone-else", "elsewhere")
	require.NoError(t, err)
	_, entries := ledgerKinds(t, n, run.SharedRunId)
	committed := len(succeededPerStep(entries))
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		d, err := n.Store().GetInstance(ctx, "runtime-instance-1")
		return err == nil && d.RunningRunCount == 0
	}, "fenced execution stopped")
	called := 0
	for i := 1; i <= 12; i++ {
		if c.count(fmt.Sprintf("s%02d", i)) > 0 {
			called++
		}
	}
	// The step in flight at the takeover, and one whose start raced with it, may have run.
	require.LessOrEqual(t, called, committed+2, "steps kept starting after the epoch was lost")
}
