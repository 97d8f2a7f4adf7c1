package actors_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
	"github.com/dairuntime/dair/testkit/leak"
)

// TestMain fails the package's tests when a goroutine outlives them (a node's work not
// tracked by its worker group, or not stopped by Node.Stop). A benchmark run also tolerates
// protoactor's leftovers of reconnecting to a stopped in-process node (the cross-node
// benchmarks stop their nodes one by one; tests run multi-node clusters as processes), and a
// delivery still waiting on a node stopped with runs queued.
func TestMain(m *testing.M) {
	flag.Parse()
	opts := leak.Protoactor()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		opts = append(opts, append(leak.ProtoactorReconnects(), leak.PendingDispatches()...)...)
	}
	goleak.VerifyTestMain(m, opts...)
}

// TestNode_Stop_leavesNoGoroutine: a node that ran work (a pipeline run end to end, a
// scale-out, recovery and health rounds, sweeps) leaves no goroutine behind once Stop returns,
// and refuses new submissions while stopping.
func TestNode_Stop_leavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, append(leak.Protoactor(), goleak.IgnoreCurrent())...)
	st := testkit.OpenStore(t, testkit.BackendEmbedded, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := actors.Start(ctx, actors.Config{NodeID: "leak", Store: st, PumpInterval: 10 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond, RecoveryInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = n.PutPipeline(ctx, []byte(threeStep))
	require.NoError(t, err)
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme", Source: "test"}
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "three", Input: []byte(`{"name":"x"}`), Snapshot: snap})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	_, err = n.SweepTenants(ctx)
	require.NoError(t, err)

	require.NoError(t, n.Stop(ctx))
	_, err = n.Submit(ctx, actors.SubmitRequest{Pipeline: "three", Snapshot: snap})
	require.ErrorIs(t, err, actors.ErrStopped)
	require.NoError(t, n.Stop(ctx), "a second Stop")
	require.NoError(t, st.Close()) // the node does not own its store; its writer goroutine ends here
}
