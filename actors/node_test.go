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

const threeStep = testkit.ThreeStepPipeline

func TestNode_Submit_threeStepSucceeds(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(threeStep))
	require.NoError(t, err)
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme", UserId: "u1", Source: "test", Roles: []string{"tenant"}}
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "three", Input: []byte(`{"name":"x"}`), Snapshot: snap})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	require.JSONEq(t, `{"b":"b saw x","c":"c"}`, string(done.Output))
	require.Equal(t, "runtime-instance-1", done.AssignedRuntimeInstanceId)
	require.NotEqual(t, done.PumpRuntimeInstanceId, done.AssignedRuntimeInstanceId)
	_, entries, err := n.Ledger(ctx, done.ExecutionId, 0)
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	require.Equal(t, 3, kinds[messages.KindStepSucceeded], kinds)
	require.Equal(t, 1, kinds[messages.KindRunSucceeded], kinds)
	require.Equal(t, 1, kinds[messages.KindScaleOutRequested], kinds)
}
