package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// BenchCommit measures CommitSteps throughput: parallel workers (8 per GOMAXPROCS) each commit
// one succeeded step with one ledger entry per call, to their own execution. It reports
// "commits/s". st must be empty of executions named "bench-*".
func BenchCommit(b *testing.B, st store.Store) {
	ctx := context.Background()
	const executions = 64
	for i := range executions {
		x := &messages.Execution{ExecutionId: fmt.Sprintf("bench-%d", i), SharedRunId: fmt.Sprintf("bench-run-%d", i),
			Epoch: 1, Status: messages.RunRunning}
		if err := st.CreateExecution(ctx, x); err != nil {
			b.Fatalf("create execution: %v", err)
		}
	}
	var worker, step atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1) % executions
		execID, runID := fmt.Sprintf("bench-%d", w), fmt.Sprintf("bench-run-%d", w)
		for pb.Next() {
			c := store.StepCommit{ExecutionID: execID, Epoch: 1,
				Step: &messages.StepState{StepId: fmt.Sprintf("s%d", step.Add(1)), Status: messages.StepSucceeded,
					Output: []byte(`{"result":"ok"}`)},
				Ledger: []*messages.LedgerEntry{{SharedRunId: runID, Kind: messages.KindStepSucceeded}}}
			errs, err := st.CommitSteps(ctx, []store.StepCommit{c})
			if err != nil {
				b.Errorf("commit: %v", err)
				return
			}
			if errs[0] != nil {
				b.Errorf("commit: %v", errs[0])
				return
			}
		}
	})
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "commits/s")
	}
}

// BenchLifecycle measures a run's start and end, the writes of an execution that are not step
// commits: with separate, CreateExecution and UpdateRunAndAppend, then UpdateExecution,
// UpdateRunAndMeter and ReleaseReservation (the calls a store without
// store.ExecutionLifecycle gets); otherwise StartExecution and FinishExecution. One run per op,
// from parallel workers (8 per GOMAXPROCS, or 1 with serial). It reports "runs/s". st must be
// empty of runs named "bench-*".
func BenchLifecycle(b *testing.B, st store.Store, separate, serial bool) {
	ctx := context.Background()
	life, ok := st.(store.ExecutionLifecycle)
	if !ok && !separate {
		b.Skip("backend has no store.ExecutionLifecycle")
	}
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		r := &messages.SharedRun{SharedRunId: id, TenantId: "t1", Pipeline: "p", Status: messages.RunDispatched,
			AssignedRuntimeInstanceId: "i1", Input: []byte(`{"q":"a question of some length"}`),
			Snapshot: &messages.ExecutionContextSnapshot{TenantId: "t1", UserId: "u1"}}
		if _, _, err := st.CreateRun(ctx, r); err != nil {
			b.Fatalf("create run: %v", err)
		}
		if _, err := st.Reserve(ctx, "i1", id, b.N+1, time.Hour); err != nil {
			b.Fatalf("reserve: %v", err)
		}
	}
	one := func(i int) error {
		id := fmt.Sprintf("bench-%d", i)
		x := &messages.Execution{ExecutionId: "x" + id, SharedRunId: id, RuntimeInstanceId: "i1", LocalRunId: "l" + id,
			Epoch: 1, Status: messages.RunRunning}
		started := &messages.LedgerEntry{Kind: messages.KindExecutionStarted, SharedRunId: id}
		ended := &messages.LedgerEntry{Kind: messages.KindRunSucceeded, SharedRunId: id}
		usage := &messages.UsageEvent{Kind: "run", TenantId: "t1", SharedRunId: id, ExecutionId: x.ExecutionId}
		if separate {
			return separateLifecycle(ctx, st, x, started, ended, usage)
		}
		if _, err := life.StartExecution(ctx, store.ExecutionStart{Execution: x, Entry: started}); err != nil {
			return err
		}
		_, err := life.FinishExecution(ctx, store.ExecutionFinish{ExecutionID: x.ExecutionId, Epoch: 1, RunID: id,
			Status: messages.RunSucceeded, Output: []byte(`{"a":"ok"}`), Entry: ended, Usage: usage, InstanceID: "i1"})
		return err
	}
	var next atomic.Int64
	if !serial {
		b.SetParallelism(8)
	}
	b.ResetTimer()
	work := func(more func() bool) {
		for more() {
			if err := one(int(next.Add(1) - 1)); err != nil {
				b.Error(err)
				return
			}
		}
	}
	if serial {
		n := 0
		work(func() bool { n++; return n <= b.N })
	} else {
		b.RunParallel(func(pb *testing.PB) { work(pb.Next) })
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "runs/s")
	}
}

// separateLifecycle is BenchLifecycle's run with separate calls.
func separateLifecycle(ctx context.Context, st store.Store, x *messages.Execution, started, ended *messages.LedgerEntry,
	usage *messages.UsageEvent) error {
	if err := st.CreateExecution(ctx, x); err != nil {
		return err
	}
	if _, _, err := st.UpdateRunAndAppend(ctx, x.SharedRunId, func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		store.MarkStarted(r, x.ExecutionId, x.RuntimeInstanceId, x.LocalRunId)
		return started, nil
	}); err != nil {
		return err
	}
	if _, err := st.UpdateExecution(ctx, x.ExecutionId, 1, func(e *messages.Execution) error {
		e.Status, e.Output = messages.RunSucceeded, []byte(`{"a":"ok"}`)
		return nil
	}); err != nil {
		return err
	}
	if _, _, err := st.UpdateRunAndMeter(ctx, x.SharedRunId, func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		r.Status, r.Output = messages.RunSucceeded, []byte(`{"a":"ok"}`)
		return ended, usage, nil
	}); err != nil {
		return err
	}
	return st.ReleaseReservation(ctx, x.RuntimeInstanceId, x.SharedRunId)
}
