package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/engine"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// errCommitterClosed answers a commit submitted after the committer closed (the node stops).
var errCommitterClosed = errors.New("actors: committer closed")

// submit sends a fenced step write (with its ledger entry, and for the success of the
// attempt being fed its usage event) to the committer; the answer comes back as a commitDone.
func (x *execution) submit(c actor.Context, f engine.Commit) {
	s, self, inc, id := x.seed, c.Self(), x.inc, f.ID
	le := f.Ledger
	le.SharedRunId, le.ExecutionId, le.RuntimeInstanceId = s.req.SharedRunId, s.executionID, s.instanceID
	le.Epoch, le.TenantId = s.epoch, s.req.GetSnapshot().GetTenantId()
	var meter *messages.UsageEvent
	if u := x.meter; u != nil && f.Record.GetStatus() == messages.StepSucceeded && u.StepId == f.Record.GetStepId() {
		meter, x.meter = u, nil
	}
	sc := store.StepCommit{ExecutionID: s.executionID, Epoch: s.epoch, Step: f.Record, Ledger: []*messages.LedgerEntry{le}, Usage: meter}
	var fin *engine.Finalize
	if f.Finalize != nil {
		fin = f.Finalize
		finish := finishOf(s, *fin)
		sc.Finish, sc.Finished = &finish, &store.FinishOutcome{}
	}
	ok := s.env.commits.submit(commitReq{
		c:     sc,
		run:   s.req.SharedRunId,
		async: f.Async,
		done: func(err error) {
			res := commitResult(err)
			s.env.system.Root.Send(self, &commitDone{inc: inc, id: id, result: res, err: err})
			if fin != nil && res != engine.CommitFenced {
				s.env.system.Root.Send(self, finishedWithCommit(s, inc, *fin, *sc.Finished))
			}
		},
	})
	if !ok {
		c.Send(self, &commitDone{inc: inc, id: id, result: engine.CommitFenced, err: errCommitterClosed})
	}
}

// commitResult maps the committer's answer: any refusal other than "already committed" (a
// success that had landed) means the execution may not write any more.
func commitResult(err error) engine.CommitResult {
	switch {
	case err == nil:
		return engine.CommitOK
	case errors.Is(err, store.ErrAlreadyCommitted):
		return engine.CommitAlreadyCommitted
	}
	return engine.CommitFenced
}

// startTask runs an attempt as a step task of the node's worker group, under a context that
// the group's stop, the step's timeout and CancelAttempt end.
func (x *execution) startTask(c actor.Context, f engine.StartStep) {
	s, e, self, inc := x.seed, x.seed.env, c.Self(), x.inc
	h, ok := e.handlers.Get(f.Uses)
	if !ok {
		x.tasks = append(x.tasks, task{step: f.Step, attempt: f.Attempt, uses: f.Uses, cancel: func() {}})
		c.Send(self, &stepDone{inc: inc, stepID: f.Step, attempt: f.Attempt,
			err: step.Permanent(fmt.Errorf("unknown handler %q", f.Uses)), permanent: true})
		return
	}
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if f.Timeout > 0 {
		ctx, cancel = context.WithTimeout(e.group.Context(), f.Timeout)
	} else {
		ctx, cancel = context.WithCancel(e.group.Context())
	}
	ctx = e.withAgentSteps(ctx)
	x.tasks = append(x.tasks, task{step: f.Step, attempt: f.Attempt, uses: f.Uses, cancel: cancel})
	tenant := s.req.GetSnapshot().GetTenantId()
	req := &step.Request{ExecutionID: s.executionID, SharedRunID: s.req.SharedRunId, StepID: f.Step, TenantID: tenant,
		Attempt: f.Attempt, IdempotencyKey: s.executionID + "/" + f.Step, With: f.With, Snapshot: s.req.Snapshot}
	if !e.steps.Go(func(context.Context) { runStepTask(ctx, e.system, self, h, req, inc) }) {
		cancel() // the node is stopping: so is this execution
	}
}

// setRunStatus records a pause or a resume on the execution (fenced), the run and the ledger.
func (x *execution) setRunStatus(status engine.RunStatus) {
	s := x.seed
	e, execID, epoch, runID, instID, tenant := s.env, s.executionID, s.epoch, s.req.SharedRunId, s.instanceID, s.req.GetSnapshot().GetTenantId()
	kind := messages.KindRunResumed
	if status == engine.RunPaused {
		kind = messages.KindRunPaused
	}
	st := status.String()
	e.group.GoTimeout(10*time.Second, func(ctx context.Context) {
		if _, err := e.st.UpdateExecution(ctx, execID, epoch, func(ex *messages.Execution) error {
			ex.Status = st
			return nil
		}); err != nil {
			e.log.Warn("update execution status", zap.String("execution_id", execID), zap.Error(err))
			return // fenced or failing: the run is not ours to change
		}
		if _, err := e.st.UpdateRun(ctx, runID, func(r *messages.SharedRun) error {
			if !messages.IsTerminalRun(r.Status) {
				r.Status = st
			}
			return nil
		}); err != nil {
			e.log.Warn("update run status", zap.String("shared_run_id", runID), zap.Error(err))
		}
		e.ledger(ctx, &messages.LedgerEntry{Kind: kind, SharedRunId: runID, ExecutionId: execID,
			RuntimeInstanceId: instID, Epoch: epoch, TenantId: tenant})
	})
}

// finalize records the terminal status off the actor goroutine; the answer comes back as a
// finalizeDone.
func (x *execution) finalize(c actor.Context, f engine.Finalize) {
	s, self, inc := x.seed, c.Self(), x.inc
	s.env.mailboxes.GoTimeout(15*time.Second, func(ctx context.Context) {
		released, err := finalizeRun(ctx, s, f)
		res := engine.FinalizeOK
		switch {
		case errors.Is(err, store.ErrStaleEpoch):
			res = engine.FinalizeFenced
		case err != nil:
			res = engine.FinalizeFailed
		}
		s.env.system.Root.Send(self, &finalizeDone{inc: inc, result: res, err: err, released: released})
	})
}

func (x *execution) onFinalized(c actor.Context, m *finalizeDone) {
	if m.inc != x.inc {
		return
	}
	x.seed.released = x.seed.released || m.released
	if m.result == engine.FinalizeFailed {
		x.seed.env.log.Warn("finalize failed; retrying", zap.String("execution_id", x.seed.executionID), zap.Error(m.err))
	}
	x.feed(c, engine.FinalizeDone{Result: m.result, Err: m.err})
}

// finalizeRun records the terminal status of f on the execution (fenced), then on the shared
// run with its terminal ledger entry and the run's usage event in the same store write. With
// the store's ExecutionLifecycle all of it, and the release of the run's slot hold, is one
// call: released reports that the hold is gone.
func finalizeRun(ctx context.Context, s *execSeed, f engine.Finalize) (released bool, err error) {
	e := s.env
	status, reason, output := f.Status.String(), f.Reason, f.Output
	finish := finishOf(s, f)
	if e.life != nil {
		res, err := e.life.FinishExecution(ctx, finish)
		if err != nil {
			return false, fmt.Errorf("finalize execution %s: %w", s.executionID, err)
		}
		finished(s, status, res)
		return true, nil
	}
	entry, meter := finish.Entry, finish.Usage
	if _, err := e.st.UpdateExecution(ctx, s.executionID, s.epoch, func(ex *messages.Execution) error {
		ex.Status, ex.Output, ex.FailureReason = status, output, reason
		return nil
	}); err != nil {
		return false, fmt.Errorf("finalize execution %s: %w", s.executionID, err)
	}
	_, changed, err := e.history.FinishRunMetered(ctx, s.req.SharedRunId, entry, meter, func(r *messages.SharedRun) bool {
		if messages.IsTerminalRun(r.Status) || (r.ExecutionId != "" && r.ExecutionId != s.executionID) {
			return false
		}
		r.Status, r.Output, r.FailureReason = status, output, reason
		return true
	})
	if err != nil {
		return false, fmt.Errorf("finalize run %s: %w", s.req.SharedRunId, err)
	}
	if changed {
		e.metrics.runFinished(status)
	}
	return false, nil
}

// finishOf is the store's end of the execution for f: the run's terminal entry and its usage
// event, and the release of the instance's hold of the run.
func finishOf(s *execSeed, f engine.Finalize) store.ExecutionFinish {
	tenant := s.req.GetSnapshot().GetTenantId()
	entry := &messages.LedgerEntry{Kind: terminalKind(f.Status), SharedRunId: s.req.SharedRunId, ExecutionId: s.executionID,
		RuntimeInstanceId: s.instanceID, Epoch: s.epoch, Reason: f.Reason, TenantId: tenant}
	meter := &messages.UsageEvent{Kind: "run", TenantId: tenant, SharedRunId: s.req.SharedRunId, ExecutionId: s.executionID}
	return store.ExecutionFinish{ExecutionID: s.executionID, Epoch: s.epoch, RunID: s.req.SharedRunId, Status: f.Status.String(),
		Output: f.Output, FailureReason: f.Reason, Entry: entry, Usage: meter, InstanceID: s.instanceID}
}

// finished tells the node of a finish the store wrote: the run's terminal entry to its
// watchers, the run's end to the metrics.
func finished(s *execSeed, status string, res store.FinishResult) {
	if res.Changed {
		s.env.hub.Appended(s.req.SharedRunId, []*messages.LedgerEntry{res.Entry})
		s.env.metrics.runFinished(status)
	}
}

// finishedWithCommit is the finalizeDone of a finish written with the last step's commit
// (engine.Commit.Finalize): the outcome the store recorded in the commit's write. A refused
// finish (the run is gone) is finalized again on its own, as a failed finalize is.
func finishedWithCommit(s *execSeed, inc int, f engine.Finalize, out store.FinishOutcome) *finalizeDone {
	switch {
	case errors.Is(out.Err, store.ErrStaleEpoch):
		return &finalizeDone{inc: inc, result: engine.FinalizeFenced, err: out.Err}
	case out.Err != nil:
		return &finalizeDone{inc: inc, result: engine.FinalizeFailed, err: fmt.Errorf("finalize execution %s: %w", s.executionID, out.Err)}
	}
	finished(s, f.Status.String(), out.Result)
	return &finalizeDone{inc: inc, result: engine.FinalizeOK, released: true}
}

// stepUsage is the usage event of a succeeded attempt (handler uses). Its At is the store's
// time of the commit that carries it.
func (x *execution) stepUsage(m *stepDone, uses string) *messages.UsageEvent {
	s := x.seed
	return &messages.UsageEvent{Kind: "step", TenantId: s.req.GetSnapshot().GetTenantId(), SharedRunId: s.req.SharedRunId,
		ExecutionId: s.executionID, StepId: m.stepID, Handler: uses, DurationNs: int64(m.dur), Attempts: int32(m.attempt),
		PromptTokens: m.usage.PromptTokens, CompletionTokens: m.usage.CompletionTokens}
}

// terminalKind is the ledger kind that records a run ending in status ("" for a status that
// is not terminal).
func terminalKind(status engine.RunStatus) string {
	switch status {
	case engine.RunSucceeded:
		return messages.KindRunSucceeded
	case engine.RunFailed:
		return messages.KindRunFailed
	case engine.RunCancelled:
		return messages.KindRunCancelled
	}
	return ""
}
