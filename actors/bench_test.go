package actors_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// benchStore opens a store for a benchmark: the embedded store with fsync (its real
// durability), or Redis with AOF everysec.
func benchStore(b *testing.B, backend testkit.Backend, r *testkit.Redis) store.Store {
	b.Helper()
	var (
		st  store.Store
		err error
	)
	if backend == testkit.BackendRedis {
		st, err = redisstore.Open(context.Background(), redisstore.Options{Addr: r.Addr(), Prefix: ids.New("b"), Timeout: 5 * time.Second, PoolSize: 64})
	} else {
		st, err = boltstore.Open(boltstore.Options{Path: filepath.Join(b.TempDir(), "dair.db")})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	})
	return st
}

func forBackends(b *testing.B, fn func(b *testing.B, backend testkit.Backend, r *testkit.Redis)) {
	// One Redis for all runs of the sub-benchmark, owned by the parent benchmark.
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{AOF: true, AppendFsync: "everysec"})
	for _, backend := range testkit.Backends {
		b.Run(string(backend), func(b *testing.B) { fn(b, backend, r) })
	}
}

// benchNode starts a node with big dedicated instances for tenant "bench" (slots run slots in
// all, in instances of at most 5,000 slots).
func benchNode(b *testing.B, st store.Store, reg *step.Registry, slots int) *actors.Node {
	b.Helper()
	ctx := context.Background()
	count := (slots + 4999) / 5000
	per := (slots + count - 1) / count
	settings := &messages.TenantSettings{TenantId: "bench", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: "bench-runtime",
		MaxRuntimeInstances: int32(count), WorkerCountPerInstance: int32(min(10000, per*2)), MaxConcurrentRunsPerInstance: int32(per),
		LocalQueueCapacity: 1000000, MaxLocalWorkersPerExecution: 64}
	var specs []actors.InstanceSpec
	for i := 1; i <= count; i++ {
		specs = append(specs, actors.InstanceSpec{ID: fmt.Sprintf("bench-runtime-%d", i), Settings: settings})
	}
	n, err := actors.Start(ctx, actors.Config{NodeID: "bench", Store: st, Handlers: reg, PumpInterval: 5 * time.Millisecond,
		PumpBatch: 256, PumpParallelism: 64, Instances: specs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	})
	if _, err := n.PutTenant(ctx, settings); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if d, err := st.GetInstance(ctx, fmt.Sprintf("bench-runtime-%d", count)); err == nil && d.CanAcceptRun {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("bench instance not ready")
		}
		time.Sleep(time.Millisecond)
	}
	return n
}

func builtins(b *testing.B) *step.Registry {
	reg := step.NewRegistry()
	if err := handlers.Register(reg, handlers.Options{}); err != nil {
		b.Fatal(err)
	}
	return reg
}

// runAll submits count runs with at most inflight outstanding and waits for all of them.
func runAll(b *testing.B, n *actors.Node, pipeline string, count, inflight int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < count; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: pipeline, Snapshot: tenantSnap("bench")})
			if err != nil {
				failed.Add(1)
				return
			}
			done, err := n.Await(ctx, run.SharedRunId)
			if err != nil || done.Status != messages.RunSucceeded {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d runs did not succeed", f)
	}
}

func wide(key string, width int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "key: %s\nsteps:\n", key)
	for i := 0; i < width; i++ {
		fmt.Fprintf(&sb, "  - id: w%03d\n    uses: echo\n    with: {value: %d}\n", i, i)
	}
	return sb.String()
}

// BenchmarkStepCommits measures durable step commits per second through the engine: runs of
// 50 independent echo steps, many runs in flight, every step committed under its epoch.
func BenchmarkStepCommits(b *testing.B) {
	forBackends(b, func(b *testing.B, backend testkit.Backend, r *testkit.Redis) {
		n := benchNode(b, benchStore(b, backend, r), builtins(b), 512)
		if _, err := n.PutPipeline(context.Background(), []byte(wide("wide", 50))); err != nil {
			b.Fatal(err)
		}
		runs := max(1, b.N/50)
		b.ResetTimer()
		start := time.Now()
		runAll(b, n, "wide", runs, 128)
		el := time.Since(start)
		b.ReportMetric(float64(runs*50)/el.Seconds(), "commits/s")
	})
}

// BenchmarkRuns3Step measures runs per second of a 3-step no-op pipeline, submit to success.
func BenchmarkRuns3Step(b *testing.B) {
	forBackends(b, func(b *testing.B, backend testkit.Backend, r *testkit.Redis) {
		n := benchNode(b, benchStore(b, backend, r), builtins(b), 2048)
		if _, err := n.PutPipeline(context.Background(), []byte(chain("three-noop", "echo", 3, "    with: {value: x}\n"))); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0 := processCPU(b)
		start := time.Now()
		runAll(b, n, "three-noop", b.N, 512)
		el := time.Since(start)
		b.Logf("%d runs in %v: %v CPU per run", b.N, el, (processCPU(b)-cpu0)/time.Duration(max(b.N, 1)))
		b.ReportMetric(float64(b.N)/el.Seconds(), "runs/s")
	})
}

// BenchmarkSubmitToFirstStep measures the latency from Submit to the first step's handler
// being called, one run at a time on a warm node.
func BenchmarkSubmitToFirstStep(b *testing.B) {
	forBackends(b, func(b *testing.B, backend testkit.Backend, r *testkit.Redis) {
		reg := builtins(b)
		started := make(chan time.Time, 1)
		if err := reg.Register("mark", step.HandlerFunc(func(ctx context.Context, r *step.Request) (step.Result, error) {
			started <- time.Now()
			return step.Result{}, nil
		})); err != nil {
			b.Fatal(err)
		}
		n := benchNode(b, benchStore(b, backend, r), reg, 64)
		if _, err := n.PutPipeline(context.Background(), []byte(chain("first", "mark", 1, ""))); err != nil {
			b.Fatal(err)
		}
		// queue-first (the default) goes through the shared queue and the pump; direct admits
		// and dispatches in the submitting goroutine.
		for _, mode := range []string{actors.SubmitQueueFirst, actors.SubmitDirect} {
			b.Run(mode, func(b *testing.B) {
				ctx := context.Background()
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "first", Snapshot: tenantSnap("bench"), Mode: mode})
					if err != nil {
						b.Fatal(err)
					}
					t1 := <-started
					lat = append(lat, t1.Sub(t0))
					if _, err := n.Await(ctx, run.SharedRunId); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				testkit.ReportLatency(b, lat)
			})
		}
	})
}

// BenchmarkInFlightMemory measures memory per in-flight execution: DAIR_BENCH_INFLIGHT
// (default 100000) runs whose single step sleeps, all admitted and running at once. It reports
// bytes/exec from the Go heap+stacks and the node process's RSS. The store is Redis (a separate
// process, as in a cluster), so the RSS is the node's own.
func BenchmarkInFlightMemory(b *testing.B) {
	count := 100000
	if v, err := strconv.Atoi(os.Getenv("DAIR_BENCH_INFLIGHT")); err == nil && v > 0 {
		count = v
	}
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{})
	b.Run("redis", func(b *testing.B) {
		st := benchStore(b, testkit.BackendRedis, r)
		n := benchNode(b, st, builtins(b), count+10)
		ctx := context.Background()
		if _, err := n.PutPipeline(ctx, []byte(chain("nap", "sleep", 1, "    with: {duration: 1h}\n"))); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		rss0 := rssBytes()
		for i := 0; i < b.N; i++ {
			sem := make(chan struct{}, 256)
			var wg sync.WaitGroup
			for j := 0; j < count; j++ {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
					if _, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap", Snapshot: tenantSnap("bench")}); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		deadline := time.Now().Add(8 * time.Minute)
		for {
			list, err := st.ListInstances(ctx)
			running := 0
			for _, d := range list {
				running += int(d.RunningRunCount)
			}
			if err == nil && running >= count*b.N {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d executions running", running)
			}
			time.Sleep(50 * time.Millisecond)
		}
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		inUse := float64((m1.HeapInuse + m1.StackInuse) - (m0.HeapInuse + m0.StackInuse))
		if path := os.Getenv("DAIR_BENCH_HEAPPROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				if err := pprof.WriteHeapProfile(f); err != nil {
					b.Error(err)
				}
				if err := f.Close(); err != nil {
					b.Error(err)
				}
			}
		}
		b.ReportMetric(inUse/float64(count*b.N), "bytes/exec")
		b.ReportMetric(float64(m1.StackInuse-m0.StackInuse)/float64(count*b.N), "stack-bytes/exec")
		b.ReportMetric(float64(runtime.NumGoroutine())/float64(count*b.N), "goroutines/exec")
		b.ReportMetric(float64(rssBytes()-rss0)/float64(count*b.N), "rss-bytes/exec")
		b.ReportMetric(float64(rssBytes()), "rss-bytes")
		// The instances' places were fixed up front: every scale-out request of the burst is
		// one the reconciler or admission asked for needlessly (the provider refuses them).
		if reqs, err := st.ListScaleOuts(ctx); err == nil {
			b.ReportMetric(float64(len(reqs)), "scaleout-requests")
		}
	})
}

func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, err := strconv.ParseInt(f[1], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}
