package actors_test

import (
	"context"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// smallMark is the benchmark's step handler: starts records every run's first step, and the
// starts of tenant small are also sent on first.
type smallMark struct {
	*starts
	first chan time.Time
}

func (m smallMark) Run(ctx context.Context, r *step.Request) (step.Result, error) {
	if r.TenantID == "small" {
		m.first <- time.Now()
	}
	return m.starts.Run(ctx, r)
}

// fairBenchNode starts a node whose capacity is one shared instance of slots slots, with
// tenants big1 (weight 1), big3 (weight 3) and small (weight 1) and the pipeline "short".
func fairBenchNode(b *testing.B, st store.Store, m smallMark, slots int) *actors.Node {
	b.Helper()
	ctx := context.Background()
	reg := builtins(b)
	if err := reg.Register("mark", m); err != nil {
		b.Fatal(err)
	}
	pool := tenancy.Normalize(&messages.TenantSettings{TenantId: "default", WorkerCountPerInstance: int32(2 * slots),
		MaxConcurrentRunsPerInstance: int32(slots), LocalQueueCapacity: 100000, AllowSharedFallback: true})
	n, err := actors.Start(ctx, actors.Config{NodeID: "fair", Store: st, Handlers: reg, PumpInterval: 5 * time.Millisecond,
		Instances: []actors.InstanceSpec{{ID: poolInstance, Settings: pool}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	})
	if _, err := n.PutPipeline(ctx, []byte(chain("short", "mark", 1, ""))); err != nil {
		b.Fatal(err)
	}
	for id, w := range map[string]int32{"big1": 1, "big3": 3, "small": 1} {
		if _, err := n.PutTenant(ctx, &messages.TenantSettings{TenantId: id, Weight: w, IsolationMode: messages.IsolationShared,
			AllowSharedFallback: true, MaxRuntimeInstances: 1}); err != nil {
			b.Fatal(err)
		}
	}
	benchWait(b, func() bool {
		d, err := st.GetInstance(ctx, poolInstance)
		return err == nil && d.CanAcceptRun
	})
	return n
}

// benchWait polls cond for up to a minute.
func benchWait(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("benchmark setup: condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// benchSubmit submits count runs of tenant from 16 goroutines (the store groups their writes).
func benchSubmit(b *testing.B, n *actors.Node, tenant string, count int) {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(count) {
				if _, err := n.Submit(context.Background(), actors.SubmitRequest{Pipeline: "short", Snapshot: tenantSnap(tenant)}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d submits failed", f)
	}
}

// BenchmarkFairShare queues DAIR_BENCH_FAIR_RUNS (default 2,000) runs for each of big1
// (weight 1) and big3 (weight 3) into a pool of 8 slots (the pool paused while they queue),
// then, while that backlog drains, submits b.N runs of tenant small (weight 1) one after the
// other. It reports share-err, the relative error of big1's share of the starts over the first
// half of the backlog against its weight share (0.25), and small's submit-to-first-step
// latency (p50-ns, p99-ns, max-ns) under the backlog.
func BenchmarkFairShare(b *testing.B) {
	per := 2000
	if v, err := strconv.Atoi(os.Getenv("DAIR_BENCH_FAIR_RUNS")); err == nil && v > 0 {
		per = v
	}
	forBackends(b, func(b *testing.B, backend testkit.Backend, r *testkit.Redis) {
		ctx := context.Background()
		m := smallMark{starts: &starts{hold: time.Millisecond}, first: make(chan time.Time, 1)}
		st := benchStore(b, backend, r)
		n := fairBenchNode(b, st, m, 8)
		control := func(op messages.ControlOp, paused bool) {
			if _, err := n.ControlInstance(ctx, poolInstance, op); err != nil {
				b.Fatal(err)
			}
			benchWait(b, func() bool {
				d, err := st.GetInstance(ctx, poolInstance)
				return err == nil && d.IsQueuePaused == paused
			})
		}
		control(messages.OpPauseQueue, true)
		for _, tenant := range []string{"big1", "big3"} {
			benchSubmit(b, n, tenant, per)
		}
		control(messages.OpResumeQueue, false)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if _, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "short", Snapshot: tenantSnap("small")}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, (<-m.first).Sub(t0))
		}
		b.StopTimer()
		window := per // the first half of the backlog: both bigs still wait
		benchWait(b, func() bool {
			got, _ := m.snapshot()
			return len(got) >= window+b.N
		})
		got, _ := m.snapshot()
		big1, bigs := 0, 0
		for _, id := range got {
			if id == "small" {
				continue
			}
			if bigs == window {
				break
			}
			bigs++
			if id == "big1" {
				big1++
			}
		}
		b.ReportMetric(math.Abs(float64(big1)/float64(bigs)-0.25)/0.25, "share-err")
		testkit.ReportLatency(b, lat)
	})
}
