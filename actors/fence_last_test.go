package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// TestExecution_fencedAtTheLastStepFinishesNothing: the execution loses its epoch while the
// run's last step is running. The step's success then comes back to a fenced activation: its
// commit, and the run's finish that rides with it on the embedded store, are refused — the
// run stays unfinished, with no terminal entry, no run usage event and its execution not
// marked succeeded.
func TestExecution_fencedAtTheLastStepFinishesNothing(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			entered, release := make(chan struct{}, 1), make(chan struct{})
			reg := registryWith(t, "gate", step.HandlerFunc(func(ctx context.Context, r *step.Request) (step.Result, error) {
				if r.StepID == "s02" {
					entered <- struct{}{}
					<-release
				}
				return step.Result{Output: []byte(`{"ok":true}`)}, nil
			}))
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: b, Config: actors.Config{Handlers: reg, RecoveryInterval: time.Hour}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(chain("gated", "gate", 2, "")))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "gated", Snapshot: tenantSnap("acme")})
			require.NoError(t, err)
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatal("the last step did not start")
			}
			// The fence must come after s02's "running" record is written (it waits up to the
			// committer's start hold): fenced before it, the activation would stop at that
			// record's refusal and never send the success and finish this test is about.
			testkit.Eventually(t, 10*time.Second, time.Millisecond, func() bool {
				kinds, _ := ledgerKinds(t, n, run.SharedRunId)
				return kinds[messages.KindStepStarted] == 2
			}, "s02's start recorded")
			// The instance's published load shows the run (it is published after the dispatch,
			// and may land later): the wait for it to drop to 0 below then means the fenced
			// activation stopped, not that the publication was not in yet.
			testkit.Eventually(t, 10*time.Second, time.Millisecond, func() bool {
				d, err := n.Store().GetInstance(ctx, "runtime-instance-1")
				return err == nil && d.RunningRunCount == 1
			}, "the run shown running on its instance")
			r, err := n.GetRun(ctx, run.SharedRunId)
			require.NoError(t, err)
			_, err = n.Store().AcquireExecution(ctx, r.ExecutionId, "someone-else", "elsewhere")
			require.NoError(t, err)
			close(release)
			testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
				d, err := n.Store().GetInstance(ctx, "runtime-instance-1")
				return err == nil && d.RunningRunCount == 0
			}, "fenced execution stopped")
			kinds, _ := ledgerKinds(t, n, run.SharedRunId)
			require.Zero(t, kinds[messages.KindRunSucceeded], "the fenced activation finished the run")
			require.Equal(t, 1, kinds[messages.KindStepSucceeded], "only s01's success is committed")
			r, err = n.GetRun(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.False(t, messages.IsTerminalRun(r.Status), "run is %s", r.Status)
			x, _, err := n.Store().GetExecution(ctx, r.ExecutionId)
			require.NoError(t, err)
			require.NotEqual(t, messages.RunSucceeded, x.Status)
			_, runs := usageOf(t, n, "acme", run.SharedRunId)
			require.Zero(t, runs, "run usage events")
		})
	}
}
