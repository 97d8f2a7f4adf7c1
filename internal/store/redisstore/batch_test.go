package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/testkit"
)

// countHook counts the pipelines that carry the test's INCR commands, and those commands.
type countHook struct {
	pipelines atomic.Int64
	piped     atomic.Int64
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		incrs := 0
		for _, c := range cmds {
			if c.Name() == "incr" {
				incrs++
			}
		}
		if incrs > 0 { // not a connection's set-up
			h.pipelines.Add(1)
			h.piped.Add(int64(incrs))
		}
		return next(ctx, cmds)
	}
}

// While every flight is busy, commands queue and then go in one pipeline, each with its own
// reply and error.
func TestBatcher_queuedCommandsShareOnePipeline(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Set(ctx, "wrongtype", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	h := &countHook{}
	rdb.AddHook(h)
	b := redisstore.NewBatcher(rdb, 1)

	// The one flight: a blocking pop that holds it until the list gets an item.
	popped := make(chan error, 1)
	go func() { popped <- b.Do(ctx, redis.NewStringSliceCmd(ctx, "blpop", "gate", 10)) }()
	deadline := time.Now().Add(10 * time.Second)
	for b.InFlight() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the blocking pop never took the flight")
		}
		time.Sleep(time.Millisecond)
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	cmds := make([]*redis.Cmd, n)
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		if i == 7 {
			key = "wrongtype" // INCR on a string that is no number fails this command only
		}
		cmds[i] = redis.NewCmd(ctx, "incr", key)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.Do(ctx, cmds[i]) }()
	}
	for b.Queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("queued %d commands, want %d", b.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
	if err := rdb.RPush(ctx, "gate", "go").Err(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-popped; err != nil {
		t.Fatalf("blocking pop: %v", err)
	}
	for i := range n {
		if i == 7 {
			if errs[i] == nil {
				t.Errorf("command 7 on a string value succeeded")
			}
			continue
		}
		if errs[i] != nil || cmds[i].Val() != int64(1) {
			t.Errorf("command %d: %v, %v; want 1", i, cmds[i].Val(), errs[i])
		}
	}
	if got := h.pipelines.Load(); got != 1 {
		t.Errorf("pipelines = %d, want 1", got)
	}
	if got := h.piped.Load(); got != n {
		t.Errorf("commands in pipelines = %d, want %d", got, n)
	}
	if b.InFlight() != 0 || b.Queued() != 0 {
		t.Errorf("after the burst: %d in flight, %d queued", b.InFlight(), b.Queued())
	}
}
