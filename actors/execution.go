package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// execSeed is what survives a supervisor restart of an execution actor: the dispatch it serves
// and the fencing epoch it acquired. Only the execution actor touches it, from Receive.
type execSeed struct {
	env         *env
	req         *messages.DispatchRequest
	localRunID  string
	instanceID  string
	workers     int
	executionID string
	epoch       int64
	incarnation int
}

// Messages private to an execution (inc ties each to one incarnation of the actor, so replies
// addressed to an incarnation that crashed are ignored after the restart).
type (
	execLoaded struct {
		inc         int
		executionID string
		epoch       int64
		exec        *messages.Execution
		steps       []*messages.StepState
		pipe        *compiled
		err         error
	}
	stepDone struct {
		inc       int
		stepID    string
		attempt   int
		output    []byte
		usage     step.Usage
		err       error
		permanent bool
		dur       time.Duration
	}
	commitDone struct {
		inc     int
		stepID  string
		attempt int
		status  string
		output  []byte
		err     error
	}
	stepRetry struct {
		inc    int
		stepID string
	}
	execReload   struct{ inc int }
	finalizeDone struct {
		inc    int
		status string
		err    error
	}
	// runFinished tells the runtime instance that an execution ended (status "fenced" when it
	// stopped because its epoch went stale).
	runFinished struct {
		localRunID  string
		executionID string
		status      string
	}
)

// Run control messages, sent to an execution by its runtime instance.
type (
	pauseRun  struct{}
	resumeRun struct{}
	cancelRun struct{ reason string }
	// InjectPanic makes an execution actor panic once (tests of supervision).
	InjectPanic struct{}
)

type inflight struct {
	attempt int
	cancel  context.CancelFunc
}

// execution drives one DAG execution: it rehydrates from the store on every start, runs ready
// steps up to its worker budget as stepTask children, commits every result under its fencing
// epoch through the committer, retries failed attempts with backoff, and finalizes the run.
type execution struct {
	seed *execSeed
	inc  int

	loaded   bool
	pipe     *compiled
	input    any
	status   map[string]string // step id -> pending/running/succeeded/failed
	attempts map[string]int
	outputs  map[string]any // step id -> decoded output of a succeeded step (template input)
	running  map[string]*inflight
	started  map[string]int64 // step id -> start of its current attempt (unix ns)
	// attempts, outputs, started and status stay small maps: an in-flight execution's memory
	// is what bounds how many a node can hold.
	commits int // commits submitted and not yet answered

	paused    bool
	stopping  bool   // cancel, failure or fencing in progress
	final     string // terminal status being finalized
	reason    string
	failed    string
	finishing bool
}

func newExecutionProps(seed *execSeed) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &execution{seed: seed} })
}

func (x *execution) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		x.inc = x.seed.incarnation
		x.status = map[string]string{}
		x.attempts = map[string]int{}
		x.outputs = map[string]any{}
		x.running = map[string]*inflight{}
		x.started = map[string]int64{}
		x.load(c)
	case *actor.Restarting:
		x.seed.incarnation++
		x.cancelAll()
		x.seed.env.log.Warn("execution restarting", zap.String("execution_id", x.seed.executionID))
	case *actor.Stopping:
		x.cancelAll()
	case *execReload:
		if m.inc == x.inc {
			x.load(c)
		}
	case *execLoaded:
		x.onLoaded(c, m)
	case *stepDone:
		x.onStepDone(c, m)
	case *commitDone:
		x.onCommitDone(c, m)
	case *stepRetry:
		if m.inc == x.inc && x.status[m.stepID] == "retrying" {
			x.status[m.stepID] = messages.StepPending
			x.schedule(c)
		}
	case *finalizeDone:
		x.onFinalized(c, m)
	case *pauseRun:
		x.pause(c)
	case *resumeRun:
		x.resume(c)
	case *cancelRun:
		x.cancel(c, m.reason)
	case *InjectPanic:
		panic("dair: injected execution panic")
	case *finalizeRetry:
		if m.inc == x.inc {
			x.finishing = false
			x.finalize(c, x.final, x.reason)
		}
	}
}

// load acquires the epoch on the first activation, then reads the execution, its committed steps
// and its pipeline, off the actor goroutine.
func (x *execution) load(c actor.Context) {
	s, self, inc := x.seed, c.Self(), x.inc
	execID, epoch := s.executionID, s.epoch
	if execID == "" {
		execID = s.req.ExecutionId
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		msg := &execLoaded{inc: inc, executionID: execID, epoch: epoch}
		var created *messages.Execution
		msg.err = func() error {
			e := s.env
			if epoch == 0 {
				if execID == "" {
					execID = ids.New("exec")
					now := e.now().UnixNano()
					created = &messages.Execution{
						ExecutionId: execID, SharedRunId: s.req.SharedRunId, LocalRunId: s.localRunID,
						RuntimeInstanceId: s.instanceID, PipelineKey: s.req.PipelineKey, PipelineHash: s.req.PipelineHash,
						Epoch: 1, Status: messages.RunRunning, Snapshot: s.req.Snapshot, Input: s.req.Input,
						CreatedAt: now, UpdatedAt: now, Owner: e.incarnation,
					}
					if err := e.st.CreateExecution(ctx, created); err != nil {
						return fmt.Errorf("create execution: %w", err)
					}
					epoch = 1
				} else {
					// Taking the execution over bumps its epoch, which would fence an activation
					// elsewhere: first make sure the run is still this instance's.
					run, err := e.st.GetRun(ctx, s.req.SharedRunId)
					if err != nil {
						return fmt.Errorf("load run: %w", err)
					}
					if err := startableHere(run, s.instanceID); err != nil {
						return err
					}
					ep, err := e.st.AcquireExecution(ctx, execID, e.incarnation, s.instanceID)
					if err != nil {
						return fmt.Errorf("acquire execution %s: %w", execID, err)
					}
					epoch = ep
				}
				msg.executionID, msg.epoch = execID, epoch
				// The run record is where a dispatch is decided: mark it running only while it is
				// still assigned here. A dispatch that arrives after the run was requeued (its
				// pump gave up, or recovery found it lost) must not run it a second time. The
				// start is recorded in the same write.
				kind := messages.KindExecutionStarted
				if s.req.ExecutionId != "" {
					kind = messages.KindRecovery
				}
				started := &messages.LedgerEntry{Kind: kind, SharedRunId: s.req.SharedRunId, ExecutionId: execID,
					RuntimeInstanceId: s.instanceID, Epoch: epoch, TenantId: s.req.GetSnapshot().GetTenantId(),
					Reason: reasonFor(kind)}
				_, appended, err := e.st.UpdateRunAndAppend(ctx, s.req.SharedRunId, func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
					if messages.IsTerminalRun(r.Status) {
						return nil, nil
					}
					if err := startableHere(r, s.instanceID); err != nil {
						return nil, err
					}
					r.Status = messages.RunRunning
					r.ExecutionId = execID
					r.LocalRunId = s.localRunID
					r.AssignedRuntimeInstanceId = s.instanceID
					return started, nil
				})
				if err != nil {
					if errors.Is(err, errRunMoved) {
						// Leave the execution on no instance, so nothing here counts it as ours.
						if _, _, ferr := e.st.FenceExecution(ctx, execID, "moved:"+e.incarnation, s.instanceID); ferr != nil && !errors.Is(ferr, store.ErrNotFound) {
							e.log.Warn("release execution of a moved run", zap.String("execution_id", execID), zap.Error(ferr))
						}
						return err
					}
					return fmt.Errorf("mark run running: %w", err)
				}
				if appended != nil {
					e.hub.Notify(s.req.SharedRunId, false)
				}
			}
			if created != nil {
				msg.exec = created // fresh: nothing committed yet, no need to read it back
			} else {
				ex, steps, err := e.st.GetExecution(ctx, execID)
				if err != nil {
					return fmt.Errorf("load execution %s: %w", execID, err)
				}
				msg.exec, msg.steps = ex, steps
			}
			p, err := e.pipelines.get(ctx, msg.exec.PipelineKey, msg.exec.PipelineHash)
			if err != nil {
				return err
			}
			msg.pipe = p
			return nil
		}()
		s.env.system.Root.Send(self, msg)
	}()
}

// errRunMoved stops an activation whose run is no longer assigned to its instance.
var errRunMoved = errors.New("actors: run is no longer assigned to this instance")

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
	if m.err != nil {
		if errors.Is(m.err, store.ErrStaleEpoch) || errors.Is(m.err, errRunMoved) || (errors.Is(m.err, store.ErrNotFound) && s.epoch != 0) {
			x.fenced(c, m.err)
			return
		}
		s.env.log.Warn("execution load failed; retrying", zap.String("tenant_id", s.req.GetSnapshot().GetTenantId()),
			zap.String("shared_run_id", s.req.SharedRunId), zap.Error(m.err))
		x.after(c, time.Second, &execReload{inc: x.inc})
		return
	}
	if m.exec.Epoch != s.epoch {
		x.fenced(c, fmt.Errorf("execution %s: epoch %d, ours %d: %w", s.executionID, m.exec.Epoch, s.epoch, store.ErrStaleEpoch))
		return
	}
	x.loaded, x.pipe = true, m.pipe
	if len(m.exec.Input) > 0 {
		if err := json.Unmarshal(m.exec.Input, &x.input); err != nil {
			x.input = nil
		}
	}
	states := make(map[string]*messages.StepState, len(m.steps))
	for _, st := range m.steps {
		states[st.StepId] = st
		x.attempts[st.StepId] = int(st.Attempts)
		if st.Status == messages.StepSucceeded {
			var v any
			if len(st.Output) > 0 {
				if err := json.Unmarshal(st.Output, &v); err != nil {
					v = nil
				}
			}
			x.outputs[st.StepId] = v
		}
	}
	switch m.exec.Status {
	case messages.RunSucceeded, messages.RunFailed, messages.RunCancelled:
		x.finalize(c, m.exec.Status, m.exec.FailureReason)
		return
	case messages.RunPaused:
		x.paused = true
	default:
		if x.paused { // paused before it had loaded
			x.setRunStatus(messages.RunPaused, messages.KindRunPaused)
		}
	}
	plan := x.pipe.g.Resume(states, x.maxAttempts)
	for _, id := range plan.Succeeded {
		x.status[id] = messages.StepSucceeded
	}
	if plan.Failed {
		x.status[plan.FailedStep] = messages.StepFailed
		x.finalize(c, messages.RunFailed, fmt.Sprintf("step %s failed", plan.FailedStep))
		return
	}
	if plan.Done {
		x.finalize(c, messages.RunSucceeded, "")
		return
	}
	x.schedule(c)
}

func (x *execution) maxAttempts(id string) int {
	st, ok := x.pipe.p.Step(id)
	if !ok || st.Retry.MaxAttempts < 1 {
		return 1
	}
	return st.Retry.MaxAttempts
}

// schedule starts ready steps while the worker budget allows.
func (x *execution) schedule(c actor.Context) {
	if !x.loaded || x.paused || x.stopping {
		return
	}
	if x.allSucceeded() {
		x.finalize(c, messages.RunSucceeded, "")
		return
	}
	for _, id := range x.pipe.g.Ready(x.status) {
		if len(x.running) >= x.seed.workers {
			return
		}
		x.startStep(c, id)
	}
}

func (x *execution) allSucceeded() bool {
	for _, id := range x.pipe.g.Order() {
		if x.status[id] != messages.StepSucceeded {
			return false
		}
	}
	return true
}

func (x *execution) startStep(c actor.Context, id string) {
	s, e := x.seed, x.seed.env
	st, _ := x.pipe.p.Step(id)
	attempt := x.attempts[id] + 1
	x.attempts[id] = attempt
	x.status[id] = messages.StepRunning
	tenant := s.req.GetSnapshot().GetTenantId()
	with, err := dag.RenderWith(st.With, dag.Scope{Input: x.input, Steps: x.outputs, TenantID: tenant, ExecutionID: s.executionID})
	if err != nil {
		c.Send(c.Self(), &stepDone{inc: x.inc, stepID: id, attempt: attempt, err: step.Permanent(fmt.Errorf("render with: %w", err)), permanent: true})
		x.running[id] = &inflight{attempt: attempt, cancel: func() {}}
		return
	}
	inputHash := history.InputHash(with)
	now := e.now()
	x.started[id] = now.UnixNano()
	x.submit(c, id, attempt, &messages.StepState{StepId: id, Status: messages.StepRunning, Attempts: int32(attempt), StartedAt: now.UnixNano()},
		&messages.LedgerEntry{Kind: messages.KindStepStarted, StepId: id, Attempt: int32(attempt), Data: mustJSON(map[string]any{"uses": st.Uses, "input_hash": inputHash})})
	h, ok := e.handlers.Get(st.Uses)
	if !ok {
		c.Send(c.Self(), &stepDone{inc: x.inc, stepID: id, attempt: attempt, err: step.Permanent(fmt.Errorf("unknown handler %q", st.Uses)), permanent: true})
		x.running[id] = &inflight{attempt: attempt, cancel: func() {}}
		return
	}
	timeout := st.Timeout
	if timeout <= 0 {
		timeout = e.cfg.DefaultStepTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	x.running[id] = &inflight{attempt: attempt, cancel: cancel}
	req := &step.Request{ExecutionID: s.executionID, SharedRunID: s.req.SharedRunId, StepID: id, TenantID: tenant,
		Attempt: attempt, IdempotencyKey: s.executionID + "/" + id, With: with, Snapshot: s.req.Snapshot}
	go runStepTask(e.system, c.Self(), ctx, h, req, x.inc)
}

// submit sends a fenced step write (with one ledger entry) to the committer; the answer comes
// back as a commitDone.
func (x *execution) submit(c actor.Context, id string, attempt int, st *messages.StepState, le *messages.LedgerEntry) {
	s, self, inc := x.seed, c.Self(), x.inc
	le.SharedRunId, le.ExecutionId, le.RuntimeInstanceId = s.req.SharedRunId, s.executionID, s.instanceID
	le.Epoch, le.TenantId = s.epoch, s.req.GetSnapshot().GetTenantId()
	x.commits++
	status, output := st.Status, st.Output
	ok := s.env.commits.submit(commitReq{
		c:   store.StepCommit{ExecutionID: s.executionID, Epoch: s.epoch, Step: st, Ledger: []*messages.LedgerEntry{le}},
		run: s.req.SharedRunId,
		done: func(err error) {
			s.env.system.Root.Send(self, &commitDone{inc: inc, stepID: id, attempt: attempt, status: status, output: output, err: err})
		},
	})
	if !ok {
		x.commits--
		x.fenced(c, errors.New("committer closed"))
	}
}

func (x *execution) onStepDone(c actor.Context, m *stepDone) {
	f := x.running[m.stepID]
	if m.inc != x.inc || f == nil || f.attempt != m.attempt {
		return
	}
	f.cancel()
	delete(x.running, m.stepID)
	x.seed.env.metrics.observeStep(m.err == nil, m.dur)
	if x.stopping && x.final != "" {
		x.maybeFinish(c)
		return
	}
	e := x.seed.env
	now := e.now().UnixNano()
	if m.err == nil {
		usage, _ := json.Marshal(map[string]any{"duration_ms": m.dur.Milliseconds(), "prompt_tokens": m.usage.PromptTokens, "completion_tokens": m.usage.CompletionTokens})
		x.submit(c, m.stepID, m.attempt, &messages.StepState{StepId: m.stepID, Status: messages.StepSucceeded, Attempts: int32(m.attempt), StartedAt: x.started[m.stepID], FinishedAt: now, Output: m.output},
			&messages.LedgerEntry{Kind: messages.KindStepSucceeded, StepId: m.stepID, Attempt: int32(m.attempt), Data: usage})
		x.recordUsage(m)
		return
	}
	max := x.maxAttempts(m.stepID)
	final := m.permanent || m.attempt >= max || x.stopping
	if final {
		x.status[m.stepID] = messages.StepFailed
		x.submit(c, m.stepID, m.attempt, &messages.StepState{StepId: m.stepID, Status: messages.StepFailed, Attempts: int32(m.attempt), StartedAt: x.started[m.stepID], FinishedAt: now, Error: m.err.Error()},
			&messages.LedgerEntry{Kind: messages.KindStepFailed, StepId: m.stepID, Attempt: int32(m.attempt), Reason: m.err.Error(), Data: mustJSON(map[string]any{"final": true})})
		return
	}
	backoff := x.backoff(m.stepID, m.attempt)
	x.status[m.stepID] = "retrying"
	x.submit(c, m.stepID, m.attempt, &messages.StepState{StepId: m.stepID, Status: messages.StepPending, Attempts: int32(m.attempt), StartedAt: x.started[m.stepID], FinishedAt: now, Error: m.err.Error()},
		&messages.LedgerEntry{Kind: messages.KindStepFailed, StepId: m.stepID, Attempt: int32(m.attempt), Reason: m.err.Error(), Data: mustJSON(map[string]any{"final": false, "retry_in_ms": backoff.Milliseconds()})})
	x.after(c, backoff, &stepRetry{inc: x.inc, stepID: m.stepID})
}

func (x *execution) recordUsage(m *stepDone) {
	s := x.seed
	st, _ := x.pipe.p.Step(m.stepID)
	ev := &messages.UsageEvent{Kind: "step", TenantId: s.req.GetSnapshot().GetTenantId(), SharedRunId: s.req.SharedRunId,
		ExecutionId: s.executionID, StepId: m.stepID, Handler: st.Uses, DurationNs: int64(m.dur), Attempts: int32(m.attempt),
		PromptTokens: m.usage.PromptTokens, CompletionTokens: m.usage.CompletionTokens, At: s.env.now().UnixNano()}
	s.env.usage(ev)
}

func (x *execution) backoff(id string, attempt int) time.Duration {
	st, _ := x.pipe.p.Step(id)
	b := st.Retry.Backoff
	if b <= 0 {
		b = 100 * time.Millisecond
	}
	for i := 1; i < attempt && b < time.Hour; i++ {
		b *= 2
	}
	if st.Retry.MaxBackoff > 0 && b > st.Retry.MaxBackoff {
		b = st.Retry.MaxBackoff
	}
	return b
}

func (x *execution) onCommitDone(c actor.Context, m *commitDone) {
	if m.inc != x.inc {
		return
	}
	x.commits--
	if m.err != nil && !errors.Is(m.err, store.ErrAlreadyCommitted) {
		x.fenced(c, m.err)
		return
	}
	switch m.status {
	case messages.StepSucceeded:
		x.status[m.stepID] = messages.StepSucceeded
		var v any
		if len(m.output) > 0 {
			if err := json.Unmarshal(m.output, &v); err != nil {
				v = nil
			}
		}
		x.outputs[m.stepID] = v
	case messages.StepFailed:
		if x.final == "" {
			x.failed = m.stepID
			x.beginStop(c, messages.RunFailed, fmt.Sprintf("step %s failed", m.stepID))
			return
		}
	}
	if x.stopping {
		x.maybeFinish(c)
		return
	}
	x.schedule(c)
}

func (x *execution) pause(c actor.Context) {
	if x.paused || x.stopping {
		return
	}
	x.paused = true
	x.setRunStatus(messages.RunPaused, messages.KindRunPaused)
}

func (x *execution) resume(c actor.Context) {
	if !x.paused || x.stopping {
		return
	}
	x.paused = false
	x.setRunStatus(messages.RunRunning, messages.KindRunResumed)
	x.schedule(c)
}

func (x *execution) setRunStatus(status, kind string) {
	if !x.loaded {
		return // onLoaded records the pause once the execution (and its epoch) is known
	}
	s := x.seed
	e, execID, epoch, runID, instID, tenant := s.env, s.executionID, s.epoch, s.req.SharedRunId, s.instanceID, s.req.GetSnapshot().GetTenantId()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := e.st.UpdateExecution(ctx, execID, epoch, func(ex *messages.Execution) error {
			ex.Status = status
			return nil
		}); err != nil {
			e.log.Warn("update execution status", zap.String("execution_id", execID), zap.Error(err))
			return // fenced or failing: the run is not ours to change
		}
		if _, err := e.st.UpdateRun(ctx, runID, func(r *messages.SharedRun) error {
			if !messages.IsTerminalRun(r.Status) {
				r.Status = status
			}
			return nil
		}); err != nil {
			e.log.Warn("update run status", zap.String("shared_run_id", runID), zap.Error(err))
		}
		e.ledger(ctx, &messages.LedgerEntry{Kind: kind, SharedRunId: runID, ExecutionId: execID,
			RuntimeInstanceId: instID, Epoch: epoch, TenantId: tenant})
	}()
}

func (x *execution) cancel(c actor.Context, reason string) {
	if x.stopping {
		return
	}
	if reason == "" {
		reason = "cancelled"
	}
	x.beginStop(c, messages.RunCancelled, reason)
}

// beginStop cancels in-flight attempts and finalizes once their commits have settled.
func (x *execution) beginStop(c actor.Context, status, reason string) {
	x.stopping = true
	x.final, x.reason = status, reason
	x.cancelAll()
	x.maybeFinish(c)
}

func (x *execution) maybeFinish(c actor.Context) {
	if len(x.running) > 0 || x.commits > 0 || x.finishing {
		return
	}
	x.finalize(c, x.final, x.reason)
}

// finalize records the terminal status on the execution (fenced), the shared run and the
// ledger, then reports to the runtime instance and stops.
func (x *execution) finalize(c actor.Context, status, reason string) {
	if x.finishing {
		return
	}
	x.finishing, x.stopping = true, true
	x.final, x.reason = status, reason
	s, self, inc := x.seed, c.Self(), x.inc
	output := x.runOutput()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err := finalizeRun(ctx, s, status, reason, output)
		s.env.system.Root.Send(self, &finalizeDone{inc: inc, status: status, err: err})
	}()
}

func finalizeRun(ctx context.Context, s *execSeed, status, reason string, output []byte) error {
	e := s.env
	if _, err := e.st.UpdateExecution(ctx, s.executionID, s.epoch, func(ex *messages.Execution) error {
		ex.Status, ex.Output, ex.FailureReason = status, output, reason
		return nil
	}); err != nil {
		return fmt.Errorf("finalize execution %s: %w", s.executionID, err)
	}
	kind := map[string]string{messages.RunSucceeded: messages.KindRunSucceeded, messages.RunFailed: messages.KindRunFailed, messages.RunCancelled: messages.KindRunCancelled}[status]
	entry := &messages.LedgerEntry{Kind: kind, SharedRunId: s.req.SharedRunId, ExecutionId: s.executionID,
		RuntimeInstanceId: s.instanceID, Epoch: s.epoch, Reason: reason, TenantId: s.req.GetSnapshot().GetTenantId()}
	_, changed, err := e.finishRun(ctx, s.req.SharedRunId, entry, func(r *messages.SharedRun) bool {
		if messages.IsTerminalRun(r.Status) || (r.ExecutionId != "" && r.ExecutionId != s.executionID) {
			return false
		}
		r.Status, r.Output, r.FailureReason = status, output, reason
		return true
	})
	if err != nil {
		return fmt.Errorf("finalize run %s: %w", s.req.SharedRunId, err)
	}
	if !changed {
		return nil
	}
	e.metrics.runFinished(status)
	e.usage(&messages.UsageEvent{Kind: "run", TenantId: s.req.GetSnapshot().GetTenantId(), SharedRunId: s.req.SharedRunId,
		ExecutionId: s.executionID, At: e.now().UnixNano()})
	return nil
}

func (x *execution) onFinalized(c actor.Context, m *finalizeDone) {
	if m.inc != x.inc {
		return
	}
	if m.err != nil {
		if errors.Is(m.err, store.ErrStaleEpoch) {
			x.fenced(c, m.err)
			return
		}
		x.seed.env.log.Warn("finalize failed; retrying", zap.String("execution_id", x.seed.executionID), zap.Error(m.err))
		x.after(c, time.Second, &finalizeRetry{inc: x.inc})
		return
	}
	x.report(c, m.status)
}

type finalizeRetry struct{ inc int }

// fenced stops the execution without writing: another owner holds a newer epoch (or the store
// refused the write), so this activation must not touch the run again.
func (x *execution) fenced(c actor.Context, err error) {
	s := x.seed
	s.env.log.Warn("execution fenced; stopping", zap.String("execution_id", s.executionID), zap.Int64("epoch", s.epoch), zap.Error(err))
	x.stopping, x.finishing = true, true
	x.cancelAll()
	s.env.metrics.fenced()
	x.report(c, "fenced")
}

func (x *execution) report(c actor.Context, status string) {
	s := x.seed
	c.Send(c.Parent(), &runFinished{localRunID: s.localRunID, executionID: s.executionID, status: status})
	c.Stop(c.Self())
}

func (x *execution) cancelAll() {
	for _, f := range x.running {
		if f != nil {
			f.cancel()
		}
	}
}

// after delivers msg to the actor after d, from a timer goroutine.
func (x *execution) after(c actor.Context, d time.Duration, msg any) {
	self, sys := c.Self(), x.seed.env.system
	time.AfterFunc(d, func() { sys.Root.Send(self, msg) })
}

// runOutput is the JSON object of the outputs of the pipeline's leaf steps, keyed by step id.
func (x *execution) runOutput() []byte {
	if x.pipe == nil {
		return nil
	}
	needed := map[string]bool{}
	for _, st := range x.pipe.p.Steps {
		for _, n := range st.Needs {
			needed[n] = true
		}
	}
	out := map[string]json.RawMessage{}
	for _, st := range x.pipe.p.Steps {
		if !needed[st.ID] {
			if v, ok := x.outputs[st.ID]; ok {
				raw, err := json.Marshal(v)
				if err != nil {
					continue
				}
				out[st.ID] = raw
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
