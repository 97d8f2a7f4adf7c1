package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dairuntime/dair/messages"
)

// Sentinel errors of package engine.
var (
	// ErrNoGraph is returned by NewIndex when it is given no graph.
	ErrNoGraph = errors.New("engine: no pipeline graph")
	// ErrNoIndex is returned by Machine.Step for a Loaded event without an Index.
	ErrNoIndex = errors.New("engine: loaded without an index")
	// ErrUnknownStep is returned by Machine.Step for an event naming a step the pipeline
	// does not have.
	ErrUnknownStep = errors.New("engine: unknown step")
)

// FinalizeRetryDelay is how long the machine waits before finalizing again after a
// FinalizeFailed answer.
const FinalizeRetryDelay = time.Second

// Config configures a Machine. The zero value is usable.
type Config struct {
	// Workers is the worker budget: the most attempts in flight at once. 0 means 1.
	Workers int
	// DefaultTimeout bounds an attempt of a step without a timeout. 0 leaves it unbounded
	// (StartStep.Timeout 0).
	DefaultTimeout time.Duration
	// TenantID is what `with` templates see as .tenant_id.
	TenantID string
	// FoldFinalize: the shell writes a Commit's Finalize in the commit's own write. The
	// machine then sends the success of a run's last step with the run's Finalize attached
	// (when not paused) and is finalizing from there; the shell answers CommitDone, then,
	// unless the commit was fenced, FinalizeDone.
	FoldFinalize bool
	// Pure reports whether handler uses is pure: its output is a function of the step's
	// rendered `with` alone (which sees the input, the outputs of committed or pure steps, the
	// tenant and the execution id) and it has no side effect. A pure step's dependents start
	// as soon as its success is sent to be committed, not when the commit is answered: after a
	// crash that lost the commit the step runs again and gives the same output. Its Commit is
	// then Async. Nil: no handler is pure.
	Pure func(uses string) bool
}

// phase is where a Machine is in its life.
type phase uint8

const (
	phaseLoading    phase = iota // waiting for Loaded
	phaseRunning                 // starting ready steps (unless paused)
	phaseStopping                // cancelled or failing: waiting for attempts and commits
	phaseFinalizing              // Finalize emitted, waiting for FinalizeDone
	phaseStopped                 // Stop emitted: every event is ignored
)

// step is the machine's state of one step, at its position in the Index (24 bytes: an
// execution of 10,000 steps holds 240 kB of them).
type step struct {
	started  int64 // start of the current attempt, unix ns
	attempts int32
	blockers int32 // needs not succeeded yet
	status   StepStatus
	inflight bool // an attempt is running
	queued   bool // in the ready queue
	waiting  bool // waiting for a retry timer
}

// pendingCommit is a Commit not yet answered.
type pendingCommit struct {
	id     uint64
	step   int32
	status StepStatus
	output []byte
	// applied: the machine counted the commit's success when it sent it (Commit.Async); the
	// answer only matters when it refuses.
	applied bool
}

// Machine is the state machine of one execution: it turns events into effects. It does no
// I/O, starts no goroutine and reads no clock: time comes in with each event. A Machine is
// not safe for concurrent use (like etcd's RawNode): one owner feeds it, one event at a time.
type Machine struct {
	cfg   Config
	ix    *Index
	phase phase

	executionID string
	input       any
	paused      bool
	unconfirmed bool // loaded Unconfirmed, no Confirmed yet: only pure steps start
	cancelled   bool // a Cancel came before Loaded
	cancelWhy   string

	steps    []step
	outputs  map[string]any // json.RawMessage outputs of succeeded steps by id (template scope)
	ready    readyQueue
	inflight int
	done     int             // steps succeeded or skipped
	commits  []pendingCommit // unanswered, by ID; answers come in order, so the first is found first
	nextID   uint64

	final        RunStatus // terminal status once stopping
	reason       string
	skipsIssued  bool
	finalization *Finalize // the last Finalize emitted

	now time.Time
	out []Effect
}

// New returns a Machine waiting for its Loaded event.
func New(cfg Config) *Machine {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	return &Machine{cfg: cfg}
}

// Step applies ev, which happened at now, and returns the effects to carry out, in order. It
// does not block. The caller owns the returned slice, the ledger entries (which it completes)
// and the `with` maps of the effects; it must not modify a Commit's record, whose output the
// machine keeps. An event that no longer applies (the outcome of an attempt
// that was cancelled or superseded, an answer to a commit of an earlier life, any event after
// Stop) changes nothing and returns no effect. Step returns an error, and changes nothing,
// only for a malformed event (ErrNoIndex, ErrUnknownStep).
func (m *Machine) Step(now time.Time, ev Event) ([]Effect, error) {
	if m.phase == phaseStopped {
		return nil, nil
	}
	m.now, m.out = now, nil
	var err error
	switch e := ev.(type) {
	case Loaded:
		err = m.onLoaded(e)
	case AttemptSucceeded:
		err = m.onSucceeded(e)
	case AttemptFailed:
		err = m.onAttemptFailed(e.Step, e.Attempt, e.Err, e.Permanent, false)
	case AttemptTimedOut:
		err = m.onAttemptFailed(e.Step, e.Attempt, e.Err, false, true)
	case CommitDone:
		m.onCommitDone(e)
	case RetryDue:
		err = m.onRetryDue(e)
	case Cancel:
		m.onCancel(e.Reason)
	case Pause:
		m.onPause()
	case Resume:
		m.onResume()
	case Fenced:
		m.fence(e.Err)
	case FinalizeDone:
		m.onFinalizeDone(e)
	case Confirmed:
		m.onConfirmed()
	default:
		err = fmt.Errorf("engine: unknown event %T", ev)
	}
	out := m.out
	m.out = nil
	return out, err
}

// Status returns the run's status as the machine sees it: the terminal status once it is
// finalizing, RunPaused while paused, else RunRunning.
func (m *Machine) Status() RunStatus {
	switch {
	case m.phase >= phaseFinalizing && m.finalization != nil:
		return m.final
	case m.paused:
		return RunPaused
	}
	return RunRunning
}

// Stopped reports whether the machine emitted Stop.
func (m *Machine) Stopped() bool { return m.phase == phaseStopped }

// StepStatus returns the status of step id and the attempts it started; ok is false before
// Loaded or for an unknown id.
func (m *Machine) StepStatus(id string) (status StepStatus, attempts int, ok bool) {
	i, ok := m.lookup(id)
	if !ok {
		return StepPending, 0, false
	}
	return m.steps[i].status, int(m.steps[i].attempts), true
}

// InFlight reports whether attempt `attempt` of step id is running: its outcome is awaited.
func (m *Machine) InFlight(id string, attempt int) bool {
	i, ok := m.lookup(id)
	return ok && m.steps[i].inflight && int(m.steps[i].attempts) == attempt
}

// Running returns the number of attempts in flight (at most Config.Workers).
func (m *Machine) Running() int { return m.inflight }

func (m *Machine) lookup(id string) (int32, bool) {
	if m.ix == nil {
		return 0, false
	}
	i, ok := m.ix.pos[id]
	return i, ok
}

func (m *Machine) find(id string) (int32, error) {
	i, ok := m.lookup(id)
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownStep, id)
	}
	return i, nil
}

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

// commit emits a Commit of rec with le and remembers what it means once answered.
func (m *Machine) commit(i int32, rec *messages.StepState, le *messages.LedgerEntry) {
	m.commitWith(i, rec, le, nil)
}

// commitWith emits the Commit of rec and le for the step at i, with fin attached (nil: none).
func (m *Machine) commitWith(i int32, rec *messages.StepState, le *messages.LedgerEntry, fin *Finalize) {
	m.nextID++
	status, _ := ParseStepStatus(rec.Status)
	m.commits = append(m.commits, pendingCommit{id: m.nextID, step: i, status: status, output: rec.Output})
	m.emit(Commit{ID: m.nextID, Record: rec, Ledger: le, Finalize: fin})
}

// pure reports whether the step at i runs a pure handler (Config.Pure).
func (m *Machine) pure(i int32) bool {
	return m.cfg.Pure != nil && m.cfg.Pure(m.ix.steps[i].Uses)
}

// answered removes the unanswered commit id and returns it; ok is false when there is none.
// The store answers a run's commits in order, so the search stops at the first entry.
func (m *Machine) answered(id uint64) (pc pendingCommit, ok bool) {
	for k := range m.commits {
		if m.commits[k].id != id {
			continue
		}
		pc = m.commits[k]
		if k == 0 {
			m.commits = m.commits[1:]
		} else {
			m.commits = append(m.commits[:k], m.commits[k+1:]...)
		}
		if len(m.commits) == 0 {
			m.commits = nil // an idle execution holds no buffer
		}
		return pc, true
	}
	return pc, false
}

// setOutput records the committed output of step id.
func (m *Machine) setOutput(id string, raw []byte) {
	if m.outputs == nil {
		m.outputs = make(map[string]any)
	}
	m.outputs[id] = json.RawMessage(raw)
}

// jsonBytes encodes v, or returns nil when it cannot be encoded.
func jsonBytes(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// decodeJSON decodes raw, or returns nil when it is empty or malformed.
func decodeJSON(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}
