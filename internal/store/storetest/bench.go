package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
