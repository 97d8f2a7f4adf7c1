package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
)

// TestStore_ExecutionLifecycle_keepsIndexes: StartExecution lists the execution under its
// instance and leaves the run in the live-runs index; FinishExecution takes both out. (Readers
// filter stale entries by status, so the contract suite cannot see them; recovery's scans
// would pay for them.)
func TestStore_ExecutionLifecycle_keepsIndexes(t *testing.T) {
	r := sharedRedis(t)
	ctx := context.Background()
	st, err := redisstore.Open(ctx, redisstore.Options{URL: r.URL(), Prefix: "lifeidx", Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	rdb := st.Client()
	require.NoError(t, rdb.Del(ctx, "lifeidx:liveruns", "lifeidx:execidx:i1").Err())

	_, _, err = st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1", Status: messages.RunDispatched,
		AssignedRuntimeInstanceId: "i1"})
	require.NoError(t, err)
	_, err = st.StartExecution(ctx, store.ExecutionStart{
		Execution: &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", RuntimeInstanceId: "i1", Epoch: 1, Status: messages.RunRunning},
		Entry:     &messages.LedgerEntry{Kind: messages.KindExecutionStarted}})
	require.NoError(t, err)
	require.NoError(t, rdb.ZScore(ctx, "lifeidx:liveruns", "r1").Err(), "live after the start")
	require.True(t, rdb.SIsMember(ctx, "lifeidx:execidx:i1", "x1").Val(), "listed under i1 after the start")

	_, err = st.FinishExecution(ctx, store.ExecutionFinish{ExecutionID: "x1", Epoch: 1, RunID: "r1", Status: messages.RunSucceeded,
		Entry: &messages.LedgerEntry{Kind: messages.KindRunSucceeded}, InstanceID: "i1"})
	require.NoError(t, err)
	require.ErrorIs(t, rdb.ZScore(ctx, "lifeidx:liveruns", "r1").Err(), redis.Nil, "live after the finish")
	require.False(t, rdb.SIsMember(ctx, "lifeidx:execidx:i1", "x1").Val(), "listed under i1 after the finish")
}
