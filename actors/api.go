package actors

import (
	"context"
	"errors"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Errors returned by Node's API methods.
var (
	// ErrUnknownPipeline is returned by Submit when no pipeline has the key.
	ErrUnknownPipeline = errors.New("actors: unknown pipeline")
	// ErrTenantSuspended is returned by Submit for a suspended tenant.
	ErrTenantSuspended = errors.New("actors: tenant suspended")
	// ErrBadInput is returned for malformed requests (bad JSON input, missing fields).
	ErrBadInput = errors.New("actors: bad input")
	// ErrNotRunning is returned by run control on a run that has not reached an instance or
	// is already final.
	ErrNotRunning = errors.New("actors: run is not running")
	// ErrNotFound is store.ErrNotFound, re-exported for callers of Node.
	ErrNotFound = store.ErrNotFound
	// ErrNoCapacity is returned by Submit when a tenant scaled to zero got no ready capacity
	// within the cold-start wait, retries included (HTTP 503).
	ErrNoCapacity = errors.New("actors: no capacity")
	// ErrStopped is returned by Submit once the node is stopping.
	ErrStopped = errors.New("actors: node stopped")
	// ErrTenantQueueFull is returned by Submit when the tenant already has max_queued_runs
	// queued runs (HTTP 429 with Retry-After); the error also matches a
	// *controlplane.QueueFullError with the counts.
	ErrTenantQueueFull = errors.New("actors: tenant queue full")
)

// PutPipeline validates, stores and caches a pipeline definition (YAML or JSON).
func (n *Node) PutPipeline(ctx context.Context, src []byte) (*dag.Pipeline, error) {
	cp, err := n.env.pipelines.put(ctx, src)
	if err != nil {
		return nil, err
	}
	return cp.p, nil
}

// GetPipeline returns the latest version of a pipeline.
func (n *Node) GetPipeline(ctx context.Context, key string) (*dag.Pipeline, error) {
	cp, err := n.env.pipelines.get(ctx, key, "")
	if err != nil {
		return nil, err
	}
	return cp.p, nil
}

// ListPipelines returns the latest version of every pipeline.
func (n *Node) ListPipelines(ctx context.Context) ([]*messages.PipelineVersion, error) {
	return n.env.st.ListPipelines(ctx)
}

// GetRun returns a run.
func (n *Node) GetRun(ctx context.Context, id string) (*messages.SharedRun, error) {
	return n.env.st.GetRun(ctx, id)
}

// ListRuns lists runs.
func (n *Node) ListRuns(ctx context.Context, f store.RunFilter) ([]*messages.SharedRun, error) {
	return n.env.st.ListRuns(ctx, f)
}

// RunSteps returns the committed step states of a run's execution (nil before it starts).
func (n *Node) RunSteps(ctx context.Context, run *messages.SharedRun) ([]*messages.StepState, error) {
	if run.ExecutionId == "" {
		return nil, nil
	}
	_, steps, err := n.env.st.GetExecution(ctx, run.ExecutionId)
	return steps, err
}

// Await blocks until the run is final or ctx ends, and returns it. A run that ends in this
// process wakes it at once; one that ends elsewhere is seen by the node's batched read of the
// awaited runs (every 200 ms, one store call for all waiters). Once the node stops it returns
// the run as last read and ErrStopped.
func (n *Node) Await(ctx context.Context, id string) (*messages.SharedRun, error) {
	ch, cancel := n.env.hub.SubscribeTerminal(id)
	defer cancel()
	polled, unwatch := n.env.awaits.watch(id)
	defer unwatch()
	for {
		run, err := n.env.st.GetRun(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil && messages.IsTerminalRun(run.Status) {
			return run, nil
		}
		select {
		case <-ctx.Done():
			if run != nil {
				return run, ctx.Err()
			}
			return nil, ctx.Err()
		case <-n.env.group.Stopping():
			return run, ErrStopped
		case <-ch:
		case <-polled:
		}
	}
}

// Ledger returns the ledger of an execution's shared run (the id may also be a shared run id).
func (n *Node) Ledger(ctx context.Context, id string, afterSeq int64) (string, []*messages.LedgerEntry, error) {
	runID, err := n.runIDFor(ctx, id)
	if err != nil {
		return "", nil, err
	}
	entries, err := n.env.st.ReadLedger(ctx, runID, afterSeq, 0)
	return runID, entries, err
}

// runIDFor maps an execution id (or a shared run id) to its shared run id.
func (n *Node) runIDFor(ctx context.Context, id string) (string, error) {
	ex, _, err := n.env.st.GetExecution(ctx, id)
	if err == nil {
		return ex.SharedRunId, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	run, err := n.env.st.GetRun(ctx, id)
	if err != nil {
		return "", err
	}
	return run.SharedRunId, nil
}

// Trace returns the timeline of an execution's run (the id may also be a shared run id).
func (n *Node) Trace(ctx context.Context, id string) (string, []history.Span, error) {
	runID, entries, err := n.Ledger(ctx, id, 0)
	if err != nil {
		return "", nil, err
	}
	return runID, history.Trace(entries), nil
}

// Replay re-runs a finished execution from its recorded step outputs without calling handlers
// and reports any divergence.
func (n *Node) Replay(ctx context.Context, executionID string) (history.Report, error) {
	ex, steps, err := n.env.st.GetExecution(ctx, executionID)
	if err != nil {
		return history.Report{}, err
	}
	cp, err := n.env.pipelines.get(ctx, ex.PipelineKey, ex.PipelineHash)
	if err != nil {
		return history.Report{}, err
	}
	entries, err := n.env.st.ReadLedger(ctx, ex.SharedRunId, 0, 0)
	if err != nil {
		return history.Report{}, err
	}
	return history.Replay(history.ReplayInput{Pipeline: cp.p, Graph: cp.g, Execution: ex, Steps: steps, Ledger: entries}), nil
}
