package redisstore_test

import (
	"context"
	"fmt"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/storetest"
	"github.com/dairuntime/dair/messages"
)

// benchExecutions creates n executions at epoch 1 and returns their ids.
func benchExecutions(b *testing.B, st *redisstore.Store, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("x%d", i)
		x := &messages.Execution{ExecutionId: ids[i], SharedRunId: "run-" + ids[i], Epoch: 1, Status: messages.RunRunning}
		if err := st.CreateExecution(context.Background(), x); err != nil {
			b.Fatalf("create execution: %v", err)
		}
	}
	return ids
}

// benchCommit is one succeeded step with one ledger entry, the engine's common write.
func benchCommit(execID string, step int64) store.StepCommit {
	return store.StepCommit{ExecutionID: execID, Epoch: 1,
		Step: &messages.StepState{StepId: fmt.Sprintf("s%d", step), Status: messages.StepSucceeded,
			Output: []byte(`{"result":"ok"}`)},
		Ledger: []*messages.LedgerEntry{{SharedRunId: "run-" + execID, Kind: messages.KindStepSucceeded}}}
}

// meteredCommit is benchCommit carrying its step's usage event, as every success commit does.
func meteredCommit(execID string, step int64) store.StepCommit {
	c := benchCommit(execID, step)
	c.Usage = &messages.UsageEvent{Kind: "step", TenantId: "t1", SharedRunId: "run-" + execID, ExecutionId: execID,
		StepId: c.Step.StepId, Handler: "http", DurationNs: 1e6, Attempts: 1}
	return c
}

// BenchmarkRawLuaCommit measures unpipelined commit-script calls (one EVALSHA round trip per
// commit) from 1 and from 32 goroutines against the shared AOF-everysec Redis.
func BenchmarkRawLuaCommit(b *testing.B) {
	for _, goroutines := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", goroutines), func(b *testing.B) {
			st := openTest(b, sharedRedis(b), nil)
			ids := benchExecutions(b, st, 64)
			ctx := context.Background()
			var worker, step atomic.Int64
			procs := max(1, goroutines/max(1, runtimeProcs()))
			b.SetParallelism(procs)
			b.ResetTimer()
			run := func(next func() bool) {
				execID := ids[worker.Add(1)%int64(len(ids))]
				for next() {
					if err := st.CommitOne(ctx, benchCommit(execID, step.Add(1))); err != nil {
						b.Errorf("commit: %v", err)
						return
					}
				}
			}
			if goroutines == 1 {
				i := 0
				run(func() bool { i++; return i <= b.N })
			} else {
				b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
			}
			b.StopTimer()
			if s := b.Elapsed().Seconds(); s > 0 {
				b.ReportMetric(float64(b.N)/s, "commits/s")
			}
		})
	}
}

// BenchmarkCommitSteps measures CommitSteps: batches of 64 commits pipelined in one round trip
// (the engine's batched path), without and with usage events, and the storetest single-commit
// parallel benchmark.
func BenchmarkCommitSteps(b *testing.B) {
	b.Run("batch=64", func(b *testing.B) { benchCommitBatch(b, benchCommit) })
	b.Run("batch=64/usage", func(b *testing.B) { benchCommitBatch(b, meteredCommit) })
	b.Run("storetest", func(b *testing.B) {
		storetest.BenchCommit(b, openTest(b, sharedRedis(b), nil))
	})
}

// benchCommitBatch commits b.N commits made by mk in pipelined batches of 64.
func benchCommitBatch(b *testing.B, mk func(execID string, step int64) store.StepCommit) {
	const batch = 64
	st := openTest(b, sharedRedis(b), nil)
	ids := benchExecutions(b, st, batch)
	ctx := context.Background()
	commits := make([]store.StepCommit, batch)
	var step int64
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		for i := range n {
			step++
			commits[i] = mk(ids[i], step)
		}
		errs, err := st.CommitSteps(ctx, commits[:n])
		if err != nil {
			b.Fatalf("commit steps: %v", err)
		}
		for i, e := range errs {
			if e != nil {
				b.Fatalf("commit %d: %v", i, e)
			}
		}
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "commits/s")
	}
}

// runtimeProcs is GOMAXPROCS, the unit of b.SetParallelism.
func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkExecutionLifecycle measures a run's start and end writes, in separate calls and
// in ExecutionLifecycle's two, one at a time and from parallel workers.
func BenchmarkExecutionLifecycle(b *testing.B) {
	for _, mode := range []struct {
		name             string
		separate, serial bool
	}{{"separate/serial", true, true}, {"lifecycle/serial", false, true}, {"separate/parallel", true, false}, {"lifecycle/parallel", false, false}} {
		b.Run(mode.name, func(b *testing.B) {
			storetest.BenchLifecycle(b, openTest(b, sharedRedis(b), nil), mode.separate, mode.serial)
		})
	}
}
