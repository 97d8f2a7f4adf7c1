package actors

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/engine"
	"github.com/dairuntime/dair/messages"
)

// execution drives one DAG execution. It is the shell of an engine.Machine, which makes every
// decision: the actor turns its messages into engine events and carries the effects out (step
// tasks, fenced commits through the committer, timers, run status writes, finalization), with
// all I/O off its goroutine through the node's worker group. It rehydrates from the store on
// every start, so a supervisor restart resumes from the committed steps.
type execution struct {
	seed   *execSeed
	inc    int
	m      *engine.Machine
	loaded bool
	tasks  []task // attempts in flight: few (the worker budget), so a slice beats a map
	// meter is the usage event of the attempt whose success is being fed to the machine: the
	// commit of that success carries it (submit), so the step is metered by its fenced write.
	meter *messages.UsageEvent
}

func newExecutionProps(seed *execSeed) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &execution{seed: seed} }, actor.WithDispatcher(seed.env.mailboxes))
}

// Receive turns the actor's messages into engine events; replies addressed to an earlier
// incarnation (a crash and restart in between) are dropped.
func (x *execution) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		x.inc = x.seed.incarnation
		x.m = engine.New(engine.Config{Workers: x.seed.workers, DefaultTimeout: x.seed.env.cfg.DefaultStepTimeout,
			TenantID: x.seed.req.GetSnapshot().GetTenantId(), FoldFinalize: x.seed.env.foldsFinish, Pure: x.seed.env.handlers.Pure})
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
	case *execStarted:
		x.onStarted(c, m)
	case *stepDone:
		x.onStepDone(c, m)
	case *commitDone:
		if m.inc == x.inc {
			x.feed(c, engine.CommitDone{ID: m.id, Result: m.result, Err: m.err})
		}
	case *stepRetry:
		if m.inc == x.inc {
			x.feed(c, engine.RetryDue{Step: m.stepID, Attempt: m.attempt})
		}
	case *finalizeDone:
		x.onFinalized(c, m)
	case *finalizeRetry:
		if m.inc == x.inc {
			x.finalize(c, m.f)
		}
	case *pauseRun:
		x.feed(c, engine.Pause{})
	case *resumeRun:
		x.feed(c, engine.Resume{})
	case *cancelRun:
		x.feed(c, engine.Cancel{Reason: m.reason})
	case *injectPanic:
		panic("dair: injected execution panic")
	}
}

// feed steps the machine with ev and carries out its effects. It returns the effects.
func (x *execution) feed(c actor.Context, ev engine.Event) []engine.Effect {
	now := x.seed.env.now()
	effs, err := x.m.Step(now, ev)
	if err != nil {
		x.seed.env.log.Error("execution event rejected", zap.String("execution_id", x.seed.executionID), zap.Error(err))
	}
	for _, ef := range effs {
		x.apply(c, now, ef)
	}
	return effs
}

// apply carries out one effect of the machine; none blocks the actor.
func (x *execution) apply(c actor.Context, now time.Time, ef engine.Effect) {
	switch f := ef.(type) {
	case engine.Commit:
		x.submit(c, f)
	case engine.StartStep:
		x.startTask(c, f)
	case engine.CancelAttempt:
		if k := x.task(f.Step); k >= 0 && x.tasks[k].attempt == f.Attempt {
			x.tasks[k].cancel()
		}
	case engine.ScheduleRetry:
		x.after(c, f.At.Sub(now), &stepRetry{inc: x.inc, stepID: f.Step, attempt: f.Attempt})
	case engine.SetRunStatus:
		x.setRunStatus(f.Status)
	case engine.Finalize:
		if d := f.NotBefore.Sub(now); !f.NotBefore.IsZero() && d > 0 {
			x.after(c, d, &finalizeRetry{inc: x.inc, f: f})
			return
		}
		x.finalize(c, f)
	case engine.Stop:
		x.stop(c, f)
	}
}

// onStepDone hands the outcome of the attempt in flight to the machine (a stale one, from an
// earlier incarnation or a superseded attempt, is dropped); the commit of a success carries
// the attempt's usage event.
func (x *execution) onStepDone(c actor.Context, m *stepDone) {
	if m.inc != x.inc || !x.m.InFlight(m.stepID, m.attempt) {
		return
	}
	var t task
	if k := x.task(m.stepID); k >= 0 {
		t = x.tasks[k]
		x.tasks = slices.Delete(x.tasks, k, k+1)
		t.cancel()
	}
	x.seed.env.metrics.observeStep(m.err == nil, m.dur)
	var ev engine.Event
	switch {
	case m.err == nil:
		ev = engine.AttemptSucceeded{Step: m.stepID, Attempt: m.attempt, Output: m.output, Duration: m.dur,
			PromptTokens: m.usage.PromptTokens, CompletionTokens: m.usage.CompletionTokens}
		x.meter = x.stepUsage(m, t.uses)
	case m.timedOut:
		ev = engine.AttemptTimedOut{Step: m.stepID, Attempt: m.attempt, Err: m.err}
	default:
		ev = engine.AttemptFailed{Step: m.stepID, Attempt: m.attempt, Err: m.err, Permanent: m.permanent}
	}
	x.feed(c, ev)
	x.meter = nil
}

// stop reports the end of the execution to its instance and stops the actor.
func (x *execution) stop(c actor.Context, f engine.Stop) {
	s := x.seed
	outcome := execEnded
	if f.Fenced {
		s.env.log.Warn("execution fenced; stopping", zap.String("execution_id", s.executionID), zap.Int64("epoch", s.epoch), zap.Error(f.Err))
		s.env.metrics.fenced()
		outcome = execFenced
	}
	x.cancelAll()
	c.Send(c.Parent(), &runFinished{localRunID: s.localRunID, executionID: s.executionID, outcome: outcome, released: s.released})
	c.Stop(c.Self())
}

// task returns the index of the task of step id, or -1.
func (x *execution) task(id string) int {
	for k := range x.tasks {
		if x.tasks[k].step == id {
			return k
		}
	}
	return -1
}

func (x *execution) cancelAll() {
	for _, t := range x.tasks {
		t.cancel()
	}
}

// after delivers msg to the actor after d, from a timer of the node's worker group.
func (x *execution) after(c actor.Context, d time.Duration, msg any) {
	self, sys := c.Self(), x.seed.env.system
	x.seed.env.group.After(d, func() { sys.Root.Send(self, msg) })
}
