package actors

import (
	"context"
	"sync"
	"time"

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
//
// It also keeps the gates of deliveries to this process's instances (Gate): an activation's
// first step waits until the dispatcher handed the delivery's outcome entry ("dispatch") to
// the ledger, so that the entry is never written after the run's step records or its end.
type prestarts struct {
	e     *env
	mu    sync.Mutex                     // guards m and gates
	m     map[string]*messages.Execution // by execution id: prepared and not yet delivered
	gates map[string]chan struct{}       // by shared run id: closed when the outcome is handed over
}

func newPrestarts(e *env) *prestarts {
	return &prestarts{e: e, m: make(map[string]*messages.Execution), gates: make(map[string]chan struct{})}
}

// gateWait bounds how long an activation waits for its delivery's gate (a dispatcher that
// never opens it would be a bug; the run goes on without the order then).
const gateWait = 5 * time.Second

// Gate holds the first step of run's activation on instanceID until open. See
// controlplane.Prestarter.
func (p *prestarts) Gate(run *messages.SharedRun, instanceID string) func() {
	if _, ok := p.e.dir.Lookup(instanceID); !ok {
		return func() {}
	}
	id, ch := run.SharedRunId, make(chan struct{})
	p.mu.Lock()
	p.gates[id] = ch
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.gates[id] == ch {
			delete(p.gates, id)
		}
		p.mu.Unlock()
		close(ch)
	}
}

// awaitGate waits until the gate of runID's delivery, if any, is open (or ctx ends, or
// gateWait passed).
func (p *prestarts) awaitGate(ctx context.Context, runID string) {
	p.mu.Lock()
	ch := p.gates[runID]
	p.mu.Unlock()
	if ch == nil {
		return
	}
	t := time.NewTimer(gateWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Prestart prepares the start of run's execution on instanceID when the instance's actor
// lives in this process and the run's pipeline (cached here) starts with a step that is not
// pure: a pure start is queued instead (startsPure), and its steps' commits share its
// transaction. See controlplane.Prestarter.
func (p *prestarts) Prestart(run *messages.SharedRun, instanceID string) (store.ExecutionStart, func(), bool) {
	if _, ok := p.e.dir.Lookup(instanceID); !ok {
		return store.ExecutionStart{}, nil, false
	}
	if c := p.e.pipelines.cached(run.PipelineHash); c == nil || startsPure(c, p.e.handlers) {
		return store.ExecutionStart{}, nil, false
	}
	execID, lr := ids.New("exec"), ids.New("lrun")
	req := &messages.DispatchRequest{SharedRunId: run.SharedRunId, PipelineKey: run.Pipeline, PipelineHash: run.PipelineHash,
		Snapshot: run.Snapshot, Input: run.Input}
	x := executionRecord(p.e, req, execID, lr, instanceID)
	st := store.ExecutionStart{Execution: x, Entry: activationEntry(req, instanceID, messages.KindExecutionStarted, execID, 1)}
	p.mu.Lock()
	p.m[execID] = x
	p.mu.Unlock()
	return st, func() { p.take(execID) }, true
}

// Started hands the start's entry to the run's watchers. See controlplane.Prestarter.
func (p *prestarts) Started(run *messages.SharedRun, res store.StartResult) {
	if res.Entry != nil {
		p.e.hub.Appended(run.SharedRunId, []*messages.LedgerEntry{res.Entry})
	}
}

// take returns the execution record prepared for execID (as the assignment wrote it: the
// store kept a copy, the caller owns it from then on), and forgets it; nil when none is (any
// more).
func (p *prestarts) take(execID string) *messages.Execution {
	if execID == "" {
		return nil
	}
	p.mu.Lock()
	x := p.m[execID]
	delete(p.m, execID)
	p.mu.Unlock()
	return x
}
