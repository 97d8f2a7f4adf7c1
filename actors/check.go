package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/internal/store"
)

// DefaultCheckLast is how many recent executions CheckPipeline replays when last is 0.
const DefaultCheckLast = 100

// checkScan bounds the runs CheckPipeline looks through for executions of the key.
const checkScan = 1000

// PipelineCheck is the answer of CheckPipeline.
type PipelineCheck struct {
	// Key is the pipeline's key.
	Key string
	// Checked counts the executions replayed against the new definition.
	Checked int
	// Reports holds one report per checked execution, newest first.
	Reports []history.Report
}

// CheckPipeline replays the last (DefaultCheckLast when 0) most recent executions of the
// pipeline that src defines against src, without storing it or calling any handler, and
// reports per execution whether it would diverge and where (see history.CheckCompat). src is
// validated like PutPipeline's; an invalid one is an error matching dag.ErrInvalid. It blocks
// on store I/O: one read of the newest runs, then one execution and one ledger per execution.
func (n *Node) CheckPipeline(ctx context.Context, src []byte, last int) (PipelineCheck, error) {
	if last <= 0 {
		last = DefaultCheckLast
	}
	next, err := dag.Load(src, n.env.handlers.Has)
	if err != nil {
		return PipelineCheck{}, err
	}
	if err := dag.CheckSource(src); err != nil {
		return PipelineCheck{}, err
	}
	if err := dag.CheckWith(next, n.env.handlers.CheckWith); err != nil {
		return PipelineCheck{}, err
	}
	nextGraph, err := dag.Compile(next)
	if err != nil {
		return PipelineCheck{}, err
	}
	out := PipelineCheck{Key: next.Key}
	runs, err := n.env.st.ListRuns(ctx, store.RunFilter{Limit: checkScan})
	if err != nil {
		return out, err
	}
	for _, run := range runs {
		if out.Checked >= last {
			break
		}
		if run.Pipeline != next.Key || run.ExecutionId == "" {
			continue
		}
		rep, err := n.checkExecution(ctx, run.ExecutionId, next, nextGraph)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out.Checked++
		out.Reports = append(out.Reports, rep)
	}
	return out, nil
}

// checkExecution loads one execution with its pinned pipeline and ledger and checks it
// against next.
func (n *Node) checkExecution(ctx context.Context, id string, next *dag.Pipeline, g *dag.Graph) (history.Report, error) {
	ex, steps, err := n.env.st.GetExecution(ctx, id)
	if err != nil {
		return history.Report{}, err
	}
	cp, err := n.env.pipelines.get(ctx, ex.PipelineKey, ex.PipelineHash)
	if err != nil {
		return history.Report{}, fmt.Errorf("load pipeline of execution %s: %w", id, err)
	}
	entries, err := n.env.st.ReadLedger(ctx, ex.SharedRunId, 0, 0)
	if err != nil {
		return history.Report{}, err
	}
	in := history.ReplayInput{Pipeline: cp.p, Graph: cp.g, Execution: ex, Steps: steps, Ledger: entries}
	return history.CheckCompat(in, next, g), nil
}
