package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/internal/store/storetest"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// shared is the one Redis of the test binary (nil when redis-server is not installed); every
// store gets its own key prefix.
var (
	shared    *testkit.Redis
	prefixSeq atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if _, err := testkit.RedisBinary(); err != nil {
		return m.Run() // every Redis test skips through testkit.RequireRedis
	}
	dir, err := os.MkdirTemp("", "redisstore-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "redisstore test: temp dir: %v\n", err)
		return 1
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "redisstore test: remove %s: %v\n", dir, err)
		}
	}()
	shared, err = testkit.LaunchRedis(testkit.RedisOptions{AOF: true, Dir: dir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "redisstore test: %v\n", err)
		return 1
	}
	defer func() {
		if err := shared.Kill(); err != nil {
			fmt.Fprintf(os.Stderr, "redisstore test: kill redis: %v\n", err)
		}
	}()
	return m.Run()
}

// sharedRedis returns the binary's Redis, skipping the test when redis-server is missing.
func sharedRedis(tb testing.TB) *testkit.Redis {
	tb.Helper()
	testkit.RequireRedis(tb)
	if shared == nil {
		tb.Fatal("shared redis did not start")
	}
	return shared
}

// openTest opens a store with a fresh prefix on r and closes it at the end of the test.
func openTest(tb testing.TB, r *testkit.Redis, now func() time.Time) *redisstore.Store {
	return openFlights(tb, r, now, 0)
}

// openFlights is openTest with Options.Flights (0: the default).
func openFlights(tb testing.TB, r *testkit.Redis, now func() time.Time, flights int) *redisstore.Store {
	tb.Helper()
	st, err := redisstore.Open(context.Background(), redisstore.Options{
		URL: r.URL(), Now: now, Prefix: fmt.Sprintf("t%d", prefixSeq.Add(1)),
		// Generous: shared CI machines stall Redis for hundreds of milliseconds under load.
		Timeout: 5 * time.Second, Flights: flights,
	})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return st
}

func TestStore_Contract(t *testing.T) {
	r := sharedRedis(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return openTest(t, r, now)
	})
}

// TestStore_Contract_oneFlight runs the contract with one pipeline in flight, so that its
// concurrent cases send their commands in shared pipelines.
func TestStore_Contract_oneFlight(t *testing.T) {
	r := sharedRedis(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return openFlights(t, r, now, 1)
	})
}

func TestStore_Open_errors(t *testing.T) {
	tests := []struct {
		name string
		opts redisstore.Options
		want error
	}{
		{name: "noAddr", opts: redisstore.Options{}, want: redisstore.ErrBadOptions},
		{name: "badURL", opts: redisstore.Options{URL: "http://x"}, want: redisstore.ErrBadOptions},
		{name: "unreachable", opts: redisstore.Options{Addr: "127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			st, err := redisstore.Open(context.Background(), tt.opts)
			if err == nil {
				t.Fatalf("Open succeeded: %v", st)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Fatalf("err %q lacks the package prefix", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Open took %s", d)
			}
		})
	}
}

func TestStore_Close_idempotent(t *testing.T) {
	r := sharedRedis(t)
	st, err := redisstore.Open(context.Background(), redisstore.Options{Addr: r.Addr(), Prefix: "close"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := st.GetRun(context.Background(), "x"); !errors.Is(err, redisstore.ErrClosed) {
		t.Fatalf("GetRun after close = %v, want redisstore.ErrClosed", err)
	}
}

func TestStore_RedisRestart_recovers(t *testing.T) {
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
	st := openTest(t, r, nil)
	ctx := context.Background()

	if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1"}); err != nil {
		t.Fatalf("create run: %v", err)
	}
	x := &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1, Status: messages.RunRunning}
	if err := st.CreateExecution(ctx, x); err != nil {
		t.Fatalf("create execution: %v", err)
	}
	commit := func(step string) ([]error, error) {
		return st.CommitSteps(ctx, []store.StepCommit{{ExecutionID: "x1", Epoch: 1,
			Step:   &messages.StepState{StepId: step, Status: messages.StepSucceeded},
			Ledger: []*messages.LedgerEntry{{SharedRunId: "r1", Kind: messages.KindStepSucceeded}}}})
	}
	if errs, err := commit("a"); err != nil || errs[0] != nil {
		t.Fatalf("commit a: %v %v", err, errs)
	}

	if err := r.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"GetRun", func() error { _, err := st.GetRun(ctx, "r1"); return err }},
		{"CommitSteps", func() error { _, err := commit("b"); return err }},
		{"Claim", func() error { _, err := st.Claim(ctx, "p", 1, time.Minute); return err }},
		{"UpdateRun", func() error {
			_, err := st.UpdateRun(ctx, "r1", func(*messages.SharedRun) error { return nil })
			return err
		}},
	}
	for _, c := range calls {
		t.Run("down/"+c.name, func(t *testing.T) {
			start := time.Now()
			err := c.call()
			if err == nil {
				t.Fatal("call succeeded with Redis down")
			}
			if errors.Is(err, store.ErrNotFound) || !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Fatalf("err = %v, want a wrapped transport error", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("call took %s with Redis down", d)
			}
		})
	}

	if err := r.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	testkit.EventuallyErr(t, 10*time.Second, func() error {
		got, err := st.GetRun(ctx, "r1")
		if err != nil {
			return err
		}
		if got.GetTenantId() != "t1" {
			return fmt.Errorf("tenant = %q", got.GetTenantId())
		}
		return nil
	}, "GetRun after restart")
	// Scripts are gone after the restart: the commit must reload them transparently.
	errs, err := commit("b")
	if err != nil || errs[0] != nil {
		t.Fatalf("commit b after restart: %v %v", err, errs)
	}
	errs, err = commit("a")
	if err != nil {
		t.Fatalf("commit a again: %v", err)
	}
	if !errors.Is(errs[0], store.ErrAlreadyCommitted) {
		t.Fatalf("commit a again = %v, want ErrAlreadyCommitted", errs[0])
	}
	ledger, err := st.ReadLedger(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	if len(ledger) != 2 || ledger[1].GetSeq() != 2 {
		t.Fatalf("ledger = %v, want 2 entries", ledger)
	}
	epoch, err := st.AcquireExecution(ctx, "x1", "o", "i1")
	if err != nil || epoch != 2 {
		t.Fatalf("acquire after restart = %d, %v; want 2", epoch, err)
	}
}

// ExampleOpen opens the store against a local Redis and creates a run. It is compiled, not run
// (it needs a server on the default port).
func ExampleOpen() {
	ctx := context.Background()
	st, err := redisstore.Open(ctx, redisstore.Options{URL: "redis://127.0.0.1:6379/0", Prefix: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println(err)
		}
	}()
	run, created, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(run.GetSharedRunId(), created)
}

// openPrefix opens a store on r's key space prefix, closed when t ends (opened again, it reads
// what an earlier store there wrote).
func openPrefix(t *testing.T, r *testkit.Redis, prefix string) *redisstore.Store {
	t.Helper()
	st, err := redisstore.Open(context.Background(), redisstore.Options{URL: r.URL(), Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestStore_ListRuns_activeStatusReadsOnlyLiveRuns: the runs that ended leave the live-runs
// index, so listing by an active status (what recovery does every round) reads the runs that
// have not ended, not the whole history; and a store written before the index existed gets it
// at Open.
func TestStore_ListRuns_activeStatusReadsOnlyLiveRuns(t *testing.T) {
	r := sharedRedis(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("t%d", prefixSeq.Add(1))
	open := func() *redisstore.Store { return openPrefix(t, r, prefix) }
	st := open()
	for i := range 300 {
		id := fmt.Sprintf("r%03d", i)
		if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: id, TenantId: "t1", Status: messages.RunQueued}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			continue // r000, r100, r200 stay queued
		}
		if _, err := st.UpdateRun(ctx, id, func(r *messages.SharedRun) error { r.Status = messages.RunSucceeded; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer func() { _ = rdb.Close() }()
	liveKey := prefix + ":liveruns"
	if n := rdb.ZCard(ctx, liveKey).Val(); n != 3 {
		t.Fatalf("live-runs index holds %d runs, want 3", n)
	}
	check := func(when string) {
		t.Helper()
		got, err := st.ListRuns(ctx, store.RunFilter{Status: messages.RunQueued, TenantID: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.SharedRunId)
		}
		if strings.Join(ids, ",") != "r200,r100,r000" {
			t.Fatalf("%s: queued runs %v, want r200,r100,r000", when, ids)
		}
	}
	check("indexed by their writes")
	// A key space written before the index existed: Open builds it.
	if err := rdb.Del(ctx, liveKey, prefix+":liveruns:built").Err(); err != nil {
		t.Fatal(err)
	}
	st = open()
	if n := rdb.ZCard(ctx, liveKey).Val(); n != 3 {
		t.Fatalf("rebuilt live-runs index holds %d runs, want 3", n)
	}
	check("rebuilt at Open")
}

func TestStore_ReadLedgers(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, sharedRedis(t), nil)
	for _, e := range []*messages.LedgerEntry{
		{SharedRunId: "r1", Kind: messages.KindSubmitted}, {SharedRunId: "r1", Kind: messages.KindDispatch},
		{SharedRunId: "r2", Kind: messages.KindSubmitted},
	} {
		if _, err := st.Append(ctx, e); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	got, err := st.ReadLedgers(ctx, map[string]int64{"r1": 1, "r2": 1, "r3": 0})
	if err != nil {
		t.Fatalf("read ledgers: %v", err)
	}
	if len(got) != 1 || len(got["r1"]) != 1 {
		t.Fatalf("read ledgers = %v, want r1's second entry only", got)
	}
	if e := got["r1"][0]; e.Seq != 2 || e.Kind != messages.KindDispatch || e.SharedRunId != "r1" {
		t.Fatalf("r1 entry = %v, want seq 2 dispatch", e)
	}
}

// TestStore_RequeueRuns_changedRunAndFlushedScripts: a run written after Take saw it is
// neither fenced nor requeued (the write may be a newer activation's, on an instance that
// reuses the lost one's id), while the batch's other runs move; a run written after its fence
// is taken again on its own; scripts flushed from Redis (a restart) are loaded again.
func TestStore_RequeueRuns_changedRunAndFlushedScripts(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, sharedRedis(t), nil)
	for _, id := range []string{"r1", "r2", "r3"} {
		_, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: id, TenantId: "t1", Status: messages.RunRunning,
			AssignedRuntimeInstanceId: "lost", ExecutionId: "x" + id})
		require.NoError(t, err)
		require.NoError(t, st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x" + id, SharedRunId: id, RuntimeInstanceId: "lost", Epoch: 1}))
	}
	require.NoError(t, st.Client().ScriptFlush(ctx).Err())
	takes3 := 0
	rq := func(id string) store.Requeue {
		return store.Requeue{RunID: id, ExecutionID: "x" + id, From: "lost", Owner: "recovery:a",
			Take: func(r *messages.SharedRun) bool {
				if id == "r1" { // a writer gets in between Take and the fence
					_, err := st.UpdateRun(ctx, id, func(r *messages.SharedRun) error { r.FailureReason = "meanwhile"; return nil })
					require.NoError(t, err)
				}
				return r.Status == messages.RunRunning
			},
			Entry: func(epoch int64) *messages.LedgerEntry {
				if id == "r3" && takes3 == 0 { // a writer gets in between the fence and the write
					takes3++
					_, err := st.UpdateRun(ctx, id, func(r *messages.SharedRun) error { r.FailureReason = "meanwhile"; return nil })
					require.NoError(t, err)
				}
				return &messages.LedgerEntry{Kind: messages.KindRecovery, Epoch: epoch}
			}}
	}
	res, err := st.RequeueRuns(ctx, []store.Requeue{rq("r1"), rq("r2"), rq("r3")})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.False(t, res[0].Fenced || res[0].Moved, "r1 changed after Take: %+v", res[0])
	x, _, err := st.GetExecution(ctx, "xr1")
	require.NoError(t, err)
	require.EqualValues(t, 1, x.Epoch, "r1's execution fenced although its run changed")
	run, err := st.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, run.Status)
	require.NoError(t, res[1].Err)
	require.True(t, res[1].Moved && res[1].Fenced && res[1].Epoch == 2, "r2: %+v", res[1])
	require.NoError(t, res[2].Err)
	require.True(t, res[2].Moved && res[2].Fenced && res[2].Epoch == 2, "r3: %+v", res[2])
	run, err = st.GetRun(ctx, "r3")
	require.NoError(t, err)
	require.Equal(t, messages.RunQueued, run.Status)
	require.Equal(t, "meanwhile", run.FailureReason, "the write between the fence and the requeue is kept")
	led, err := st.ReadLedger(ctx, "r3", 0, 0)
	require.NoError(t, err)
	require.Len(t, led, 1)
}

// TestStore_Assign_entryWithoutShape: a registry entry published without a shape (by a node
// of an earlier release) is listed with the shape it would have, and a decision on it is
// refused until the instance publishes again; then it assigns.
func TestStore_Assign_entryWithoutShape(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("t%d", prefixSeq.Add(1))
	st, err := redisstore.Open(ctx, redisstore.Options{URL: sharedRedis(t).URL(), Prefix: prefix, Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	d := &messages.CapacityDescriptor{RuntimeInstanceId: "i1", CanAcceptRun: true}
	require.NoError(t, st.PutInstance(ctx, d, time.Minute))
	require.NoError(t, st.Client().HDel(ctx, prefix+":instshape", "i1").Err())
	_, vers, err := st.ListInstanceVersions(ctx)
	require.NoError(t, err)
	require.Len(t, vers, 1)
	require.Equal(t, store.DescriptorShape(d), vers[0], "listed with the shape it would have")
	assign := func(id string) store.AssignResult {
		t.Helper()
		run := &messages.SharedRun{SharedRunId: id, TenantId: "t1", Status: messages.RunDispatched, AssignedRuntimeInstanceId: "i1"}
		res, _, err := st.Assign(ctx, store.Assignment{Run: run, Version: store.NewRunVersion, InstanceID: "i1", InstanceVersion: vers[0],
			Limit: 10, TTL: time.Minute})
		require.NoError(t, err)
		return res
	}
	require.Equal(t, store.InstanceChanged, assign("r1"), "no stored shape: refused")
	require.NoError(t, st.PutInstance(ctx, d, time.Minute))
	require.Equal(t, store.Assigned, assign("r2"), "published again: its shape is stored")
}

// TestStore_Lease_keyExpires: a lease's key lives as long as the lease plus a minute, so the
// leases of past node incarnations do not stay in Redis forever; a renewal extends it.
func TestStore_Lease_keyExpires(t *testing.T) {
	r := sharedRedis(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("t%d", prefixSeq.Add(1))
	st, err := redisstore.Open(ctx, redisstore.Options{URL: r.URL(), Prefix: prefix, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer func() { _ = rdb.Close() }()
	key := prefix + ":lease:alive/m1"
	ok, err := st.AcquireLease(ctx, "alive/m1", "m1", 2*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	ttl := rdb.PTTL(ctx, key).Val()
	require.Greater(t, ttl, time.Minute, "key ttl")
	require.LessOrEqual(t, ttl, time.Minute+2*time.Second, "key ttl")
	ok, err = st.AcquireLease(ctx, "alive/m1", "m1", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, rdb.PTTL(ctx, key).Val(), time.Hour, "renewed key ttl")
}

// TestStore_Open_buildsTheParkedRunsIndex: a key space whose live-runs index was built before
// the parked-runs index existed (marker "1") gets the parked index at Open, so a finished
// scale-out request still finds every parked run.
func TestStore_Open_buildsTheParkedRunsIndex(t *testing.T) {
	r := sharedRedis(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("t%d", prefixSeq.Add(1))
	open := func() *redisstore.Store { return openPrefix(t, r, prefix) }
	st := open()
	for i, status := range []string{messages.RunScaleOutRequested, messages.RunQueued, messages.RunScaleOutRequested, messages.RunSucceeded} {
		if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: fmt.Sprintf("r%d", i), TenantId: "t1", Status: status,
			CreatedAt: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer func() { _ = rdb.Close() }()
	parkedKey := prefix + ":liveruns:parked"
	if n := rdb.ZCard(ctx, parkedKey).Val(); n != 2 {
		t.Fatalf("parked-runs index holds %d runs, want 2", n)
	}
	if err := rdb.Del(ctx, parkedKey).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, prefix+":liveruns:built", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st = open()
	got, err := st.ListRuns(ctx, store.RunFilter{Status: messages.RunScaleOutRequested})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SharedRunId != "r2" || got[1].SharedRunId != "r0" {
		t.Fatalf("parked runs after the rebuild: %v", got)
	}
	if v := rdb.Get(ctx, prefix+":liveruns:built").Val(); v != "2" {
		t.Fatalf("marker = %q, want 2", v)
	}
}
