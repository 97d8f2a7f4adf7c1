package rcq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/rcq"
	"github.com/dairuntime/dair/providers/remote"
	"github.com/dairuntime/dair/testkit"
)

// consume runs a consumer named name for b's instance until the test ends.
func consume(t *testing.T, rdb redis.UniversalClient, b *testkit.RuntimeBackend, name string, reclaimIdle time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	c := rcq.NewConsumer(rcq.ConsumerConfig{Client: rdb, Backend: b, Instances: b.Instances, Name: name, Block: 50 * time.Millisecond,
		ReclaimIdle: reclaimIdle})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		b.SetHang(false)
		cancel()
		<-done
	})
}

func descriptor(id string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, ProviderName: rcq.Name, TransportName: rcq.Name, Endpoint: rcq.StreamKey(id),
		Metadata: map[string]string{rcq.MetadataQueueKey: rcq.StreamKey(id)}}
}

func dispatchReq(id string) *messages.DispatchRequest {
	return &messages.DispatchRequest{SharedRunId: "run-1", RuntimeInstanceId: id, Snapshot: &messages.ExecutionContextSnapshot{
		TenantId: "acme", TenantGroupId: "g", OrgId: "org-7", UserId: "u-42", CorrelationId: "c-1", Roles: []string{"tenant"}}}
}

func redisClient(t *testing.T) redis.UniversalClient {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 32})
	t.Cleanup(func() { require.NoError(t, rdb.Close()) })
	return rdb
}

// TestProvider_Dispatch_roundTrip: a dispatch through the instance's Redis stream reaches the
// consumer's backend with its snapshot byte-equal, and the answer comes back.
func TestProvider_Dispatch_roundTrip(t *testing.T) {
	rdb := redisClient(t)
	b := testkit.NewRuntimeBackend("i-1")
	consume(t, rdb, b, "c1", 0)
	p := rcq.New(rcq.Config{Client: rdb, Remote: remote.Config{Timeout: 3 * time.Second}})
	req := dispatchReq("i-1")
	res := p.Dispatch(context.Background(), descriptor("i-1"), req)
	require.True(t, res.GetOk(), res.GetReason())
	got, _ := b.Dispatches()
	require.Len(t, got, 1)
	require.True(t, proto.Equal(req.Snapshot, got[0].Snapshot), "snapshot at the host %v, sent %v", got[0].Snapshot, req.Snapshot)
	qs := p.QueueStatus(context.Background(), descriptor("i-1"))
	require.True(t, qs.GetResult().GetOk(), qs.GetResult().GetReason())
}

// TestProvider_Dispatch_faults: a stream nobody consumes times out, is retried and exhausted
// with redis-command-queue-dispatch-timeout, and repeated timeouts open its circuit.
func TestProvider_Dispatch_faults(t *testing.T) {
	rdb := redisClient(t)
	p := rcq.New(rcq.Config{Client: rdb, Remote: remote.Config{Timeout: 100 * time.Millisecond, Attempts: 3, Backoff: time.Millisecond,
		CircuitFailures: 4, CircuitOpenFor: time.Minute}})
	ctx := context.Background()
	res := p.Dispatch(ctx, descriptor("nobody"), dispatchReq("nobody"))
	require.True(t, res.GetRetryable())
	require.Equal(t, "redis-command-queue-retry-exhausted: 3 attempts, last redis-command-queue-dispatch-timeout", res.GetReason())
	n, err := rdb.XLen(ctx, rcq.StreamKey("nobody")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "three attempts were queued")
	res = p.Dispatch(ctx, descriptor("nobody"), dispatchReq("nobody"))
	require.Equal(t, "redis-command-queue-circuit-open", res.GetReason(), "the fourth timeout opened the circuit")
	n, err = rdb.XLen(ctx, rcq.StreamKey("nobody")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "one more attempt before the circuit opened, none after")
}

// TestConsumer_reclaimsCommandsOfAStuckConsumer: a command read by a consumer that never
// acknowledges it (stuck, or dead) is reclaimed by another consumer of the group after the
// reclaim idle time, carried out, and answered to the waiting sender.
func TestConsumer_reclaimsCommandsOfAStuckConsumer(t *testing.T) {
	rdb := redisClient(t)
	stuck := testkit.NewRuntimeBackend("i-1")
	stuck.SetHang(true)
	consume(t, rdb, stuck, "stuck", time.Hour)
	p := rcq.New(rcq.Config{Client: rdb, Remote: remote.Config{Timeout: 10 * time.Second, Attempts: 1}})
	res := make(chan *messages.ProviderResult, 1)
	go func() { res <- p.Dispatch(context.Background(), descriptor("i-1"), dispatchReq("i-1")) }()
	testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return stuck.Calls() == 1 }, "the stuck consumer read the command")
	healthy := testkit.NewRuntimeBackend("i-1")
	consume(t, rdb, healthy, "healthy", 200*time.Millisecond)
	r := <-res
	require.True(t, r.GetOk(), r.GetReason())
	got, _ := healthy.Dispatches()
	require.Len(t, got, 1, "the healthy consumer carried out the reclaimed command")
}

// TestProvider_Dispatch_waitsTheWholeTimeoutForAStartingConsumer: a command sent before its
// instance's consumer runs is answered once the consumer starts, within the attempt's timeout
// (1.9 s here; the reply wait used to be cut to whole seconds, 1 s, so a replacement host that
// started consuming 1.2 s later saw its first dispatches time out and its circuit open).
func TestProvider_Dispatch_waitsTheWholeTimeoutForAStartingConsumer(t *testing.T) {
	rdb := redisClient(t)
	b := testkit.NewRuntimeBackend("late")
	p := rcq.New(rcq.Config{Client: rdb, Remote: remote.Config{Timeout: 1900 * time.Millisecond, Attempts: 1}})
	start := time.Now()
	late := time.AfterFunc(1200*time.Millisecond, func() { consume(t, rdb, b, "late", 0) }) // the host comes up late
	t.Cleanup(func() { late.Stop() })
	res := p.Dispatch(context.Background(), descriptor("late"), dispatchReq("late"))
	require.True(t, res.GetOk(), "after %s: %s", time.Since(start).Round(time.Millisecond), res.GetReason())
	got, _ := b.Dispatches()
	require.Len(t, got, 1)
}
