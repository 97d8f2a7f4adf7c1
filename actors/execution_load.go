package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/engine"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// load acquires the epoch on the first activation, then reads the execution, its committed steps
// and its pipeline, off the actor goroutine; the result comes back as an execLoaded.
func (x *execution) load(c actor.Context) {
	s, self, inc := x.seed, c.Self(), x.inc
	execID, epoch, startWait, started := s.executionID, s.epoch, s.startWait, s.started
	if execID == "" {
		execID = s.req.ExecutionId
	}
	s.started = nil // a restarted incarnation reads what was committed since
	s.env.mailboxes.GoTimeout(15*time.Second, func(ctx context.Context) {
		msg := &execLoaded{inc: inc, executionID: execID, epoch: epoch, marked: s.marked, exec: started}
		if startWait != nil {
			// An earlier incarnation queued the start: it must be written before the read.
			if _, err := startWait(); err != nil {
				msg.err = fmt.Errorf("%w: %w", errStartRefused, err)
			}
		}
		if msg.err == nil {
			msg.err = loadExecution(ctx, s, msg)
		}
		// The first step waits for the dispatcher's outcome entry (prestart.go): the run's
		// ledger has it before any step record.
		s.env.prestarts.awaitGate(ctx, s.req.SharedRunId)
		s.env.system.Root.Send(self, msg)
		if msg.err == nil && msg.confirm != nil {
			err := confirmStart(ctx, s, msg.executionID, msg.confirm)
			s.env.system.Root.Send(self, &execStarted{inc: inc, err: err})
		}
	})
}

// errStartRefused stops an activation whose queued start was refused.
var errStartRefused = errors.New("actors: the execution's start was refused")

// confirmStart waits for the answer to a queued start and tells the run's watchers of its entry;
// a refused start of a run that moved leaves the execution, as startExecution does.
func confirmStart(ctx context.Context, s *execSeed, execID string, wait func() (store.StartResult, error)) error {
	res, err := wait()
	if err != nil {
		if errors.Is(err, errRunMoved) || errors.Is(err, store.ErrNotFound) {
			leaveMoved(ctx, s.env, execID, s.instanceID)
		}
		return fmt.Errorf("%w: %w", errStartRefused, err)
	}
	if res.Entry != nil {
		s.env.hub.Appended(s.req.SharedRunId, []*messages.LedgerEntry{res.Entry})
	}
	return nil
}

// loadExecution fills msg: on the first activation it creates the execution (a new run) or
// takes it over (a recovered run, which bumps its epoch) and marks the run running; then it
// reads the execution state and the pipeline it pinned.
func loadExecution(ctx context.Context, s *execSeed, msg *execLoaded) error {
	e := s.env
	var created *messages.Execution
	if msg.epoch == 0 {
		var err error
		if created, err = activate(ctx, s, msg); err != nil {
			return err
		}
	}
	if !msg.marked {
		if err := markRunning(ctx, s, msg.executionID, msg.epoch); err != nil {
			return err
		}
		msg.marked = true
	}
	switch {
	case created != nil:
		msg.exec = created // fresh: nothing committed yet, no need to read it back
	case msg.exec != nil:
		// Started by the run's assignment (prestart.go), loaded for the first time: as fresh.
	default:
		ex, steps, err := e.st.GetExecution(ctx, msg.executionID)
		if err != nil {
			return fmt.Errorf("load execution %s: %w", msg.executionID, err)
		}
		msg.exec, msg.steps = ex, steps
	}
	if msg.pipe != nil {
		return nil // read before a queued start
	}
	p, err := e.pipelines.get(ctx, msg.exec.PipelineKey, msg.exec.PipelineHash)
	if err != nil {
		return err
	}
	msg.pipe = p
	return nil
}

// activate creates the execution of a new run (epoch 1), or acquires the existing one (a new
// epoch) once the run is known to be still this instance's. It sets msg's id and epoch, and
// marked when the store marked the run running in the same call.
func activate(ctx context.Context, s *execSeed, msg *execLoaded) (*messages.Execution, error) {
	e := s.env
	if s.req.ExecutionId == "" {
		// A new run: its execution is this activation's to create, on every load until the
		// create is confirmed (one whose answer was lost finds it made).
		if msg.executionID == "" {
			msg.executionID = ids.New("exec")
		}
		created := newExecution(s, msg.executionID)
		if e.life != nil && !msg.marked {
			if qs, ok := e.life.(store.QueuedStarter); ok {
				if p, err := e.pipelines.get(ctx, s.req.PipelineKey, s.req.PipelineHash); err == nil && startsPure(p, e.handlers) {
					msg.pipe = p
					return queueStart(ctx, s, msg, created, qs)
				}
			}
			return startExecution(ctx, s, msg, created)
		}
		err := e.st.CreateExecution(ctx, created)
		switch {
		case errors.Is(err, store.ErrExists):
			// An earlier attempt of this activation created it and lost the answer (ids are
			// never reused): it is ours, at epoch 1 unless a recovery took it since, which
			// the load's epoch check tells.
			created = nil
		case err != nil:
			return nil, fmt.Errorf("create execution: %w", err)
		}
		msg.epoch = 1
		return created, nil
	}
	// Taking the execution over bumps its epoch, which would fence an activation elsewhere:
	// first make sure the run is still this instance's.
	run, err := e.st.GetRun(ctx, s.req.SharedRunId)
	if err != nil {
		return nil, fmt.Errorf("load run: %w", err)
	}
	if err := startableHere(run, s.instanceID); err != nil {
		return nil, err
	}
	ep, err := e.st.AcquireExecution(ctx, msg.executionID, e.incarnation, s.instanceID)
	if err != nil {
		return nil, fmt.Errorf("acquire execution %s: %w", msg.executionID, err)
	}
	msg.epoch = ep
	return nil, nil
}

// newExecution is the record of a new run's execution id at epoch 1, owned by this process.
func newExecution(s *execSeed, id string) *messages.Execution {
	return executionRecord(s.env, s.req, id, s.localRunID, s.instanceID)
}

// executionRecord is the record of the new execution id of the run req dispatches, at epoch
// 1 on instanceID under localRunID, owned by this process.
func executionRecord(e *env, req *messages.DispatchRequest, id, localRunID, instanceID string) *messages.Execution {
	now := e.now().UnixNano()
	return &messages.Execution{
		ExecutionId: id, SharedRunId: req.SharedRunId, LocalRunId: localRunID,
		RuntimeInstanceId: instanceID, PipelineKey: req.PipelineKey, PipelineHash: req.PipelineHash,
		Epoch: 1, Status: messages.RunRunning, Snapshot: req.Snapshot, Input: req.Input,
		CreatedAt: now, UpdatedAt: now, Owner: e.incarnation,
	}
}

// startExecution creates x and marks its run running, with the start in its ledger, in one
// store call (store.ExecutionLifecycle), under markRunning's conditions. It returns x when the
// call created it, nil when it existed (an earlier attempt whose answer was lost made it; the
// load reads it back and checks its epoch).
func startExecution(ctx context.Context, s *execSeed, msg *execLoaded, x *messages.Execution) (*messages.Execution, error) {
	e := s.env
	res, err := e.life.StartExecution(ctx, store.ExecutionStart{Execution: x,
		Entry: startEntry(s, messages.KindExecutionStarted, x.ExecutionId, x.Epoch)})
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w: the run is gone: %w", errRunMoved, err)
	}
	switch {
	case errors.Is(err, errRunMoved):
		leaveMoved(ctx, e, x.ExecutionId, s.instanceID)
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("start execution: %w", err)
	}
	msg.epoch, msg.marked = x.Epoch, true
	if res.Entry != nil {
		e.hub.Appended(s.req.SharedRunId, []*messages.LedgerEntry{res.Entry})
	}
	if !res.Created {
		return nil, nil
	}
	return x, nil
}

// queueStart queues the creation of x and the mark of its run (store.QueuedStarter) instead of
// waiting for them: the pure steps the run starts with run meanwhile, and their commits, queued
// after the start, share its write (one transaction instead of two, one after the other). The
// answer comes through msg.confirm.
func queueStart(ctx context.Context, s *execSeed, msg *execLoaded, x *messages.Execution, qs store.QueuedStarter) (*messages.Execution, error) {
	wait, err := qs.QueueStartExecution(ctx, store.ExecutionStart{Execution: x,
		Entry: startEntry(s, messages.KindExecutionStarted, x.ExecutionId, x.Epoch)})
	if err != nil {
		return nil, fmt.Errorf("start execution: %w", err)
	}
	msg.epoch, msg.marked, msg.confirm = x.Epoch, true, wait
	return x, nil
}

// startsPure reports whether every step of p that needs none is pure (step.Pure): only then
// is a queued start worth it, as nothing else may start before it is written.
func startsPure(p *compiled, handlers *step.Registry) bool {
	roots := 0
	for _, st := range p.p.Steps {
		if len(st.Needs) > 0 {
			continue
		}
		if !handlers.Pure(st.Uses) {
			return false
		}
		roots++
	}
	return roots > 0
}

// startEntry is the ledger entry of an activation's start (kind execution_started or recovery).
func startEntry(s *execSeed, kind, execID string, epoch int64) *messages.LedgerEntry {
	return activationEntry(s.req, s.instanceID, kind, execID, epoch)
}

// activationEntry is startEntry for the run req dispatches to instanceID.
func activationEntry(req *messages.DispatchRequest, instanceID, kind, execID string, epoch int64) *messages.LedgerEntry {
	return &messages.LedgerEntry{Kind: kind, SharedRunId: req.SharedRunId, ExecutionId: execID,
		RuntimeInstanceId: instanceID, Epoch: epoch, TenantId: req.GetSnapshot().GetTenantId(),
		Reason: reasonFor(kind)}
}

// markRunning marks the run running, with the start (or recovery) in its ledger in the same
// write. The run record is where a dispatch is decided: it is marked only while it is still
// assigned here and names no other execution (store.StartCheck), so a dispatch that arrives
// after the run was requeued (its pump gave up, or recovery found it lost) does not run it a
// second time. A mark that already holds (a retried load whose first write applied but whose
// answer was lost) is not written again.
func markRunning(ctx context.Context, s *execSeed, execID string, epoch int64) error {
	e := s.env
	kind := messages.KindExecutionStarted
	if s.req.ExecutionId != "" {
		kind = messages.KindRecovery
	}
	started := startEntry(s, kind, execID, epoch)
	_, appended, err := e.st.UpdateRunAndAppend(ctx, s.req.SharedRunId, func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		mark, err := store.StartCheck(r, execID, s.instanceID, s.localRunID)
		if err != nil || !mark {
			return nil, err
		}
		store.MarkStarted(r, execID, s.instanceID, s.localRunID)
		return started, nil
	})
	if err != nil {
		if errors.Is(err, errRunMoved) {
			leaveMoved(ctx, e, execID, s.instanceID)
			return err
		}
		return fmt.Errorf("mark run running: %w", err)
	}
	if appended != nil {
		e.hub.Appended(s.req.SharedRunId, []*messages.LedgerEntry{appended})
	}
	return nil
}

// leaveMoved leaves the execution of a run that moved on no instance, so nothing here counts
// it as ours (a missing execution is fine: there is nothing to leave).
func leaveMoved(ctx context.Context, e *env, execID, instanceID string) {
	if _, _, err := e.st.FenceExecution(ctx, execID, "moved:"+e.incarnation, instanceID); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("release execution of a moved run", zap.String("execution_id", execID), zap.Error(err))
	}
}

// errRunMoved stops an activation whose run is no longer assigned to its instance.
var errRunMoved = store.ErrRunMoved

// startableHere reports (as errRunMoved) whether an execution of run may start on instanceID:
// the run must be assigned there and dispatched, running (a restart) or paused.
func startableHere(run *messages.SharedRun, instanceID string) error {
	switch {
	case messages.IsTerminalRun(run.Status):
		return nil
	case run.AssignedRuntimeInstanceId != instanceID:
		return fmt.Errorf("%w: assigned to %q", errRunMoved, run.AssignedRuntimeInstanceId)
	case run.Status != messages.RunDispatched && run.Status != messages.RunRunning && run.Status != messages.RunPaused:
		return fmt.Errorf("%w: run is %s", errRunMoved, run.Status)
	}
	return nil
}

func reasonFor(kind string) string {
	if kind == messages.KindRecovery {
		return "resumed-from-committed-steps"
	}
	return "started"
}

// onLoaded starts the machine from the loaded state. A load that lost the epoch (or the run)
// is fencing; any other failure is retried a second later.
func (x *execution) onLoaded(c actor.Context, m *execLoaded) {
	if m.inc != x.inc || x.loaded {
		return
	}
	s := x.seed
	if m.executionID != "" {
		s.executionID = m.executionID
	}
	if m.epoch != 0 {
		s.epoch = m.epoch
	}
	s.marked = s.marked || m.marked
	if m.confirm != nil {
		s.startWait = m.confirm
	}
	if m.err != nil {
		if errors.Is(m.err, store.ErrStaleEpoch) || errors.Is(m.err, errRunMoved) || errors.Is(m.err, errStartRefused) ||
			(errors.Is(m.err, store.ErrNotFound) && s.epoch != 0) {
			x.feed(c, engine.Fenced{Err: m.err})
			return
		}
		s.env.log.Warn("execution load failed; retrying", zap.String("tenant_id", s.req.GetSnapshot().GetTenantId()),
			zap.String("shared_run_id", s.req.SharedRunId), zap.Error(m.err))
		x.after(c, time.Second, &execReload{inc: x.inc})
		return
	}
	if m.exec.Epoch != s.epoch {
		x.feed(c, engine.Fenced{Err: fmt.Errorf("execution %s: epoch %d, ours %d: %w", s.executionID, m.exec.Epoch, s.epoch, store.ErrStaleEpoch)})
		return
	}
	ix, err := indexes.get(m.pipe)
	if err != nil {
		s.env.log.Error("index pipeline", zap.String("execution_id", s.executionID), zap.Error(err))
		x.after(c, time.Second, &execReload{inc: x.inc})
		return
	}
	x.loaded = true
	status, _ := engine.ParseRunStatus(m.exec.Status)
	x.feed(c, engine.Loaded{Index: ix, ExecutionID: s.executionID, Status: status, Reason: m.exec.FailureReason,
		Steps: m.steps, Input: m.exec.Input, Unconfirmed: m.confirm != nil})
}

// onStarted tells the machine how the start it was loaded without ended: written, or refused
// (the run moved, or the write failed), which stops it as a lost epoch would.
func (x *execution) onStarted(c actor.Context, m *execStarted) {
	if m.inc != x.inc {
		return
	}
	if m.err != nil {
		x.feed(c, engine.Fenced{Err: m.err})
		return
	}
	x.feed(c, engine.Confirmed{})
}

// indexes shares one engine.Index per pipeline version (content hash) between the executions
// of every node of the process.
var indexes = &indexCache{m: map[string]*engine.Index{}}

// indexCache maps pipeline hashes to engine indexes. It is goroutine-safe and bounded: past
// maxIndexes versions it starts over.
type indexCache struct {
	mu sync.Mutex // guards m
	m  map[string]*engine.Index
}

const maxIndexes = 4096

func (c *indexCache) get(cp *compiled) (*engine.Index, error) {
	hash := cp.p.Hash
	c.mu.Lock()
	ix := c.m[hash]
	c.mu.Unlock()
	if ix != nil && hash != "" {
		return ix, nil
	}
	ix, err := engine.NewIndex(cp.g)
	if err != nil || hash == "" {
		return ix, err
	}
	c.mu.Lock()
	if len(c.m) >= maxIndexes {
		c.m = map[string]*engine.Index{}
	}
	c.m[hash] = ix
	c.mu.Unlock()
	return ix, nil
}
