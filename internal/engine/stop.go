package engine

import (
	"encoding/json"

	"github.com/dairuntime/dair/messages"
)

func (m *Machine) onCancel(reason string) {
	if reason == "" {
		reason = "cancelled"
	}
	switch m.phase {
	case phaseLoading:
		m.cancelled, m.cancelWhy = true, reason
	case phaseRunning:
		m.beginStop(RunCancelled, reason)
	}
}

func (m *Machine) onPause() {
	switch {
	case m.phase == phaseLoading:
		m.paused = true // recorded once loaded
	case m.phase == phaseRunning && !m.paused:
		m.paused = true
		m.emit(SetRunStatus{Status: RunPaused})
	}
}

func (m *Machine) onResume() {
	switch {
	case m.phase == phaseLoading:
		m.paused = false
	case m.phase == phaseRunning && m.paused:
		m.paused = false
		m.emit(SetRunStatus{Status: RunRunning})
		m.schedule()
	}
}

// beginStop stops the run as status: it cancels the attempts in flight and finalizes once
// they have reported and every commit is answered (settle).
func (m *Machine) beginStop(status RunStatus, reason string) {
	m.phase, m.final, m.reason = phaseStopping, status, reason
	m.cancelInFlight()
	m.settle()
}

func (m *Machine) cancelInFlight() {
	if m.inflight == 0 {
		return
	}
	for i := range m.steps {
		if s := &m.steps[i]; s.inflight {
			m.emit(CancelAttempt{Step: m.ix.ids[i], Attempt: int(s.attempts)})
		}
	}
}

// settle finalizes a stopping run once nothing is in flight or uncommitted. A failed run
// first commits as skipped every step that never started (or waits for a retry): those can
// never run now.
func (m *Machine) settle() {
	if m.phase != phaseStopping || m.inflight > 0 || len(m.commits) > 0 || m.unconfirmed {
		return
	}
	if m.final == RunFailed && !m.skipsIssued {
		m.skipsIssued = true
		var ids []string
		for i := range m.steps {
			if m.steps[i].status == StepPending {
				ids = append(ids, m.ix.ids[i])
			}
		}
		if len(ids) > 0 {
			m.skip(ids, m.reason)
			return
		}
	}
	m.finalize(m.final, m.reason)
}

// skip commits each of ids as skipped, with a step_skipped ledger entry.
func (m *Machine) skip(ids []string, reason string) {
	for _, id := range ids {
		i := m.ix.pos[id]
		s := &m.steps[i]
		m.commit(i, &messages.StepState{StepId: id, Status: messages.StepSkipped, Attempts: s.attempts,
			StartedAt: s.started, FinishedAt: m.now.UnixNano()},
			&messages.LedgerEntry{Kind: messages.KindStepSkipped, StepId: id, Reason: reason})
	}
}

func (m *Machine) finalize(status RunStatus, reason string) {
	m.phase, m.final, m.reason = phaseFinalizing, status, reason
	m.finalization = &Finalize{Status: status, Reason: reason, Output: m.output()}
	m.emit(*m.finalization)
}

func (m *Machine) onFinalizeDone(e FinalizeDone) {
	if m.phase != phaseFinalizing {
		return
	}
	switch e.Result {
	case FinalizeOK:
		m.phase = phaseStopped
		m.emit(Stop{Status: m.final})
	case FinalizeFenced:
		m.fence(e.Err)
	default:
		f := *m.finalization
		f.NotBefore = m.now.Add(FinalizeRetryDelay)
		m.emit(f)
	}
}

// onConfirmed lets the steps that are not pure start, and the run finalize, once the
// execution's start is written.
func (m *Machine) onConfirmed() {
	if !m.unconfirmed {
		return
	}
	m.unconfirmed = false
	switch m.phase {
	case phaseRunning:
		m.schedule()
	case phaseStopping:
		m.settle()
	}
}

// fence stops without writing anything more: the epoch belongs to another activation.
func (m *Machine) fence(err error) {
	m.cancelInFlight()
	m.phase = phaseStopped
	m.emit(Stop{Fenced: true, Err: err})
}

// output is the JSON object of the outputs of the pipeline's leaf steps that succeeded, each
// decoded and encoded again (so that it reads as the template scope saw it).
func (m *Machine) output() []byte {
	out := map[string]json.RawMessage{}
	for i, id := range m.ix.ids {
		if !m.ix.leaf[i] {
			continue
		}
		if v, ok := m.outputs[id]; ok {
			raw, _ := v.(json.RawMessage)
			if enc := jsonBytes(decodeJSON(raw)); enc != nil {
				out[id] = enc
			}
		}
	}
	return jsonBytes(out)
}
