package engine

import (
	"fmt"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/messages"
)

// schedule starts queued steps while the worker budget allows, or finalizes a run whose steps
// are all done. A paused run starts nothing and does not finalize until resumed.
func (m *Machine) schedule() {
	if m.phase != phaseRunning || m.paused {
		return
	}
	if m.done == len(m.steps) {
		if len(m.commits) == 0 && !m.unconfirmed { // a pure step's success may still be on its way
			m.finalize(RunSucceeded, "")
		}
		return
	}
	for m.inflight < m.cfg.Workers && len(m.ready) > 0 && m.phase == phaseRunning {
		if m.unconfirmed && !m.pure(m.ready[0]) {
			return // the first ready step waits for the execution's start to be written
		}
		i := m.ready.pop()
		m.steps[i].queued = false
		m.start(i)
	}
}

// start begins the next attempt of the step at i: commit its start, then start it. A `with`
// that does not render fails the attempt for good, as a handler's permanent error would.
func (m *Machine) start(i int32) {
	s, st := &m.steps[i], m.ix.steps[i]
	s.attempts++
	attempt := int(s.attempts)
	s.status = StepRunning
	with, err := m.render(i)
	if err != nil {
		m.failAttempt(i, attempt, fmt.Sprintf("render with: %v", err), true)
		return
	}
	s.inflight, s.started = true, m.now.UnixNano()
	m.inflight++
	m.commit(i, &messages.StepState{StepId: st.ID, Status: messages.StepRunning, Attempts: s.attempts, StartedAt: s.started},
		&messages.LedgerEntry{Kind: messages.KindStepStarted, StepId: st.ID, Attempt: s.attempts,
			Data: jsonBytes(startedData{InputHash: history.InputHash(with), Uses: st.Uses})})
	timeout := st.Timeout
	if timeout <= 0 {
		timeout = m.cfg.DefaultTimeout
	}
	m.emit(StartStep{Step: st.ID, Attempt: attempt, Uses: st.Uses, With: with, Timeout: timeout})
}

// render renders the `with` of the step at i over the input and the outputs its templates read.
func (m *Machine) render(i int32) (map[string]any, error) {
	scope := dag.Scope{Input: m.input, TenantID: m.cfg.TenantID, ExecutionID: m.executionID}
	switch refs := m.ix.refs[i]; {
	case !refs.templated:
	case refs.all:
		scope.Steps = m.outputs
	default:
		scope.Steps = make(map[string]any, len(refs.ids))
		for _, id := range refs.ids {
			if v, ok := m.outputs[id]; ok {
				scope.Steps[id] = v
			}
		}
	}
	return dag.RenderWith(m.ix.steps[i].With, scope)
}

// ended marks the end of an attempt and reports whether it is the one in flight.
func (m *Machine) ended(i int32, attempt int) bool {
	s := &m.steps[i]
	if !s.inflight || int(s.attempts) != attempt {
		return false
	}
	s.inflight = false
	m.inflight--
	return true
}

func (m *Machine) onSucceeded(e AttemptSucceeded) error {
	i, err := m.find(e.Step)
	if err != nil || !m.ended(i, e.Attempt) {
		return err
	}
	if m.phase != phaseRunning {
		m.settle() // cancelled or failing: the result is not committed
		return nil
	}
	s := &m.steps[i]
	usage := jsonBytes(usageData{CompletionTokens: e.CompletionTokens, DurationMS: e.Duration.Milliseconds(), PromptTokens: e.PromptTokens})
	rec := &messages.StepState{StepId: e.Step, Status: messages.StepSucceeded, Attempts: s.attempts,
		StartedAt: s.started, FinishedAt: m.now.UnixNano(), Output: e.Output}
	le := &messages.LedgerEntry{Kind: messages.KindStepSucceeded, StepId: e.Step, Attempt: s.attempts, Data: usage}
	if m.cfg.FoldFinalize && !m.paused && m.done == len(m.steps)-1 {
		// Every other step is done: this success ends the run, and its Finalize rides in the
		// same write. From here the run is finalizing, as after the commit's answer.
		m.setOutput(e.Step, e.Output)
		m.phase, m.final, m.reason = phaseFinalizing, RunSucceeded, ""
		m.finalization = &Finalize{Status: RunSucceeded, Output: m.output()}
		fin := *m.finalization
		m.commitWith(i, rec, le, &fin)
		return nil
	}
	if !m.pure(i) {
		m.commit(i, rec, le)
		m.schedule()
		return nil
	}
	// A pure step's success counts now (its dependents start on it); the answer only matters
	// when it refuses.
	k := len(m.out)
	m.commit(i, rec, le)
	m.commits[len(m.commits)-1].applied = true
	m.succeed(i, rec.Output)
	m.schedule()
	if m.inflight > 0 {
		// Something runs on: nothing waits for this commit, which the shell may hold for the
		// records that follow (Async). Otherwise the machine waits for its answer (to
		// finalize, or for a retry timer) and the shell writes it at once.
		c := m.out[k].(Commit)
		c.Async = true
		m.out[k] = c
	}
	return nil
}

func (m *Machine) onAttemptFailed(id string, attempt int, cause error, permanent, timedOut bool) error {
	i, err := m.find(id)
	if err != nil || !m.ended(i, attempt) {
		return err
	}
	reason := "attempt failed"
	if cause != nil {
		reason = cause.Error()
	}
	if timedOut {
		timeout := m.ix.steps[i].Timeout
		if timeout <= 0 {
			timeout = m.cfg.DefaultTimeout
		}
		reason = fmt.Sprintf("timed out after %s: %s", timeout, reason)
	}
	m.failAttempt(i, attempt, reason, permanent)
	return nil
}

// failAttempt handles the failure of attempt `attempt` of the step at i, which is no
// longer in flight. With attempts left it commits the failure, schedules the retry and goes
// on; otherwise it commits the step failed and stops the run as failed (fail-fast).
func (m *Machine) failAttempt(i int32, attempt int, reason string, permanent bool) {
	if m.phase != phaseRunning {
		m.settle()
		return
	}
	s, id := &m.steps[i], m.ix.ids[i]
	rec := &messages.StepState{StepId: id, Attempts: s.attempts, StartedAt: s.started, FinishedAt: m.now.UnixNano(), Error: reason}
	le := &messages.LedgerEntry{Kind: messages.KindStepFailed, StepId: id, Attempt: s.attempts, Reason: reason}
	if permanent || attempt >= m.ix.maxAttempts(i) {
		s.status, rec.Status = StepFailed, messages.StepFailed
		le.Data = jsonBytes(finalData{Final: true})
		m.commit(i, rec, le)
		m.beginStop(RunFailed, fmt.Sprintf("step %s failed", id))
		return
	}
	backoff := m.ix.backoff(i, attempt)
	s.status, s.waiting, rec.Status = StepPending, true, messages.StepPending
	le.Data = jsonBytes(retryData{RetryInMS: backoff.Milliseconds()})
	m.commit(i, rec, le)
	m.emit(ScheduleRetry{Step: id, Attempt: attempt + 1, At: m.now.Add(backoff)})
	m.schedule()
}

func (m *Machine) onRetryDue(e RetryDue) error {
	i, err := m.find(e.Step)
	if err != nil {
		return err
	}
	s := &m.steps[i]
	if !s.waiting || int(s.attempts)+1 != e.Attempt {
		return nil
	}
	s.waiting = false
	if m.phase == phaseRunning && !s.queued {
		s.queued = true
		m.ready.push(i)
		m.schedule()
	}
	return nil
}

// onCommitDone applies an answered commit: a success releases the step's dependents (only
// those: no rescan of the graph; a pure step's success released them when it was sent), a
// skip counts the step done, a fenced answer stops.
func (m *Machine) onCommitDone(e CommitDone) {
	pc, ok := m.answered(e.ID)
	if !ok {
		return
	}
	if e.Result == CommitFenced {
		m.fence(e.Err)
		return
	}
	switch {
	case pc.applied:
	case pc.status == StepSucceeded:
		m.succeed(pc.step, pc.output)
	case pc.status == StepSkipped:
		m.steps[pc.step].status = StepSkipped
		m.done++
	}
	if m.phase == phaseRunning {
		m.schedule()
	} else {
		m.settle()
	}
}

// succeed counts the success of the step at i, with its output, and releases its dependents.
func (m *Machine) succeed(i int32, output []byte) {
	m.steps[i].status = StepSucceeded
	m.setOutput(m.ix.ids[i], output)
	m.done++
	m.release(i)
}

// release counts the success of the step at i for each dependent and queues those whose
// needs have now all succeeded.
func (m *Machine) release(i int32) {
	for _, d := range m.ix.dependents[i] {
		ds := &m.steps[d]
		ds.blockers--
		if ds.blockers == 0 && ds.status == StepPending && !ds.waiting && !ds.queued {
			ds.queued = true
			m.ready.push(d)
		}
	}
}

// Ledger entry data. Fields are in key order, so the JSON is what encoding a map gives.
type (
	startedData struct {
		InputHash string `json:"input_hash"`
		Uses      string `json:"uses"`
	}
	usageData struct {
		CompletionTokens int64 `json:"completion_tokens"`
		DurationMS       int64 `json:"duration_ms"`
		PromptTokens     int64 `json:"prompt_tokens"`
	}
	finalData struct {
		Final bool `json:"final"`
	}
	retryData struct {
		Final     bool  `json:"final"`
		RetryInMS int64 `json:"retry_in_ms"`
	}
)
