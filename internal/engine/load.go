package engine

import (
	"fmt"

	"github.com/dairuntime/dair/messages"
)

// onLoaded builds the state from the committed records (dag.Graph.Resume's rules: succeeded
// and skipped steps never run again; interrupted steps and failures with attempts left run
// again, their attempts counted on) and starts the run, or finalizes it.
func (m *Machine) onLoaded(e Loaded) error {
	if m.phase != phaseLoading {
		return nil
	}
	if e.Index == nil {
		return ErrNoIndex
	}
	ix := e.Index
	m.ix, m.executionID, m.unconfirmed = ix, e.ExecutionID, e.Unconfirmed
	m.steps = make([]step, ix.Len())
	m.input = decodeJSON(e.Input)
	records := make(map[string]*messages.StepState, len(e.Steps))
	for _, rec := range e.Steps {
		i, ok := ix.pos[rec.GetStepId()]
		if !ok {
			continue // a record of a step the pinned pipeline does not have
		}
		records[rec.GetStepId()] = rec
		m.steps[i].attempts = rec.GetAttempts()
		m.steps[i].started = rec.GetStartedAt()
		m.steps[i].status, _ = ParseStepStatus(rec.GetStatus())
	}
	plan := ix.graph.Resume(records, ix.maxAttemptsOf)
	for _, id := range plan.Succeeded {
		m.setOutput(id, records[id].GetOutput())
		m.done++
	}
	m.done += len(plan.Skipped)
	m.phase = phaseRunning
	switch {
	case e.Status.Terminal():
		m.finalize(e.Status, e.Reason) // finalized before a crash: record it again
		return nil
	case m.cancelled:
		m.beginStop(RunCancelled, m.cancelWhy)
		return nil
	case e.Status == RunPaused:
		// Paused before a restart: stay paused, and say so on the run, which the restart's
		// start marked running.
		m.paused = true
		m.emit(SetRunStatus{Status: RunPaused})
	case m.paused: // paused before it loaded
		m.emit(SetRunStatus{Status: RunPaused})
	}
	if plan.Failed {
		// The records keep their statuses; what never started is skipped before finalizing.
		m.skipsIssued = true
		m.skip(plan.Skip, fmt.Sprintf("step %s failed", plan.FailedStep))
		m.beginStop(RunFailed, fmt.Sprintf("step %s failed", plan.FailedStep))
		return nil
	}
	m.prepare(plan.Ready)
	m.skip(plan.Skip, "a step it needs was skipped")
	if plan.Done {
		m.finalize(RunSucceeded, "")
		return nil
	}
	m.schedule()
	return nil
}

// prepare makes every step that is not final pending, counts the needs each still waits
// for, and queues ready (the steps whose needs all succeeded).
func (m *Machine) prepare(ready []string) {
	for i := range m.steps {
		s := &m.steps[i]
		if s.status == StepSucceeded || s.status == StepSkipped {
			continue
		}
		s.status = StepPending
		for _, n := range m.ix.needs[i] {
			if m.steps[n].status != StepSucceeded {
				s.blockers++
			}
		}
	}
	for _, id := range ready {
		i := m.ix.pos[id]
		m.steps[i].queued = true
		m.ready.push(i)
	}
}
