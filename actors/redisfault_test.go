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

func TestNode_redisKilledMidRunThenRestarted(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
	c := newCounter()
	c.delay = 100 * time.Millisecond
	n := testkit.StartNode(t, testkit.NodeOptions{Backend: testkit.BackendRedis, Redis: r,
		Config: actors.Config{Handlers: registryWith(t, "count", c)}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(chain("ten", "count", 10, "")))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "ten", Snapshot: tenantSnap("acme")})
	require.NoError(t, err)
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		_, entries := ledgerKinds(t, n, run.SharedRunId)
		return len(succeededPerStep(entries)) >= 2
	}, "two steps committed")
	require.NoError(t, r.Kill())
	// The store reports errors while Redis is down; the node stays up.
	_, err = n.GetRun(ctx, run.SharedRunId)
	require.Error(t, err)
	// Let a step finish while Redis is down, so its commit must wait and be retried.
	testkit.Eventually(t, 15*time.Second, 5*time.Millisecond, func() bool { return c.done("s03") >= 1 }, "a step finished while Redis was down")
	_, err = n.GetRun(ctx, run.SharedRunId)
	require.Error(t, err, "Redis is still down")
	require.NoError(t, r.Restart())
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	_, entries := ledgerKinds(t, n, run.SharedRunId)
	per := succeededPerStep(entries)
	require.Len(t, per, 10)
	for id, k := range per {
		require.Equal(t, 1, k, "step %s succeeded %d times in the ledger", id, k)
	}
}
