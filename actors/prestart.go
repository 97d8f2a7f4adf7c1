package actors

import (
	"sync"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// prestarts is the node's controlplane.Prestarter: over a store.StartingAssigner (the embedded
// store) the dispatcher writes a new run's assignment to an instance of this process together
// with the start of the run's execution, which an activation would otherwise write in a
// transaction of its own before the first step. The execution id and local run id are chosen
// here; the instance that gets the run's delivery takes the execution as started (epoch 1,
// the run marked running) instead of starting it.
//
// Nothing depends on the preparation surviving: a delivery that finds none (it was forgotten,
// the instance restarted) names the execution as a recovered run's does, and the activation
// takes it over at a new epoch.
type prestarts struct {
	e  *env
	mu sync.Mutex        // guards m
	m  map[string]string // execution id → local run id, prepared and not yet delivered
}

func newPrestarts(e *env) *prestarts { return &prestarts{e: e, m: make(map[string]string)} }

// Prestart prepares the start of run's execution on instanceID when the instance's actor
// lives in this process. See controlplane.Prestarter.
func (p *prestarts) Prestart(run *messages.SharedRun, instanceID string) (store.ExecutionStart, func(), bool) {
	if _, ok := p.e.dir.Lookup(instanceID); !ok || run.ExecutionId != "" {
		return store.ExecutionStart{}, nil, false
	}
	execID, lr := ids.New("exec"), ids.New("lrun")
	req := &messages.DispatchRequest{SharedRunId: run.SharedRunId, PipelineKey: run.Pipeline, PipelineHash: run.PipelineHash,
		Snapshot: run.Snapshot, Input: run.Input}
	st := store.ExecutionStart{Execution: executionRecord(p.e, req, execID, lr, instanceID),
		Entry: activationEntry(req, instanceID, messages.KindExecutionStarted, execID, 1)}
	p.mu.Lock()
	p.m[execID] = lr
	p.mu.Unlock()
	return st, func() { p.take(execID) }, true
}

// Started hands the start's entry to the run's watchers. See controlplane.Prestarter.
func (p *prestarts) Started(run *messages.SharedRun, res store.StartResult) {
	if res.Entry != nil {
		p.e.hub.Appended(run.SharedRunId, []*messages.LedgerEntry{res.Entry})
	}
}

// take returns the local run id prepared for execID, and forgets it; ok is false when none is
// (any more).
func (p *prestarts) take(execID string) (localRunID string, ok bool) {
	if execID == "" {
		return "", false
	}
	p.mu.Lock()
	localRunID, ok = p.m[execID]
	delete(p.m, execID)
	p.mu.Unlock()
	return localRunID, ok
}
