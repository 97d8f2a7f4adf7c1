package actors

import (
	"sync"

	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/messages"
)

// Hub tells in-process waiters that a shared run's ledger or status changed, so SSE streams and
// Await read the store at once instead of polling. A change written by this process may carry
// the ledger entries as the store wrote them (Appended): a Tail subscriber takes those instead
// of reading the store again. A change without them (Notify), or more of them than a tail
// keeps, leaves the tail blind: its reader re-reads the durable ledger, which keeps every reader
// correct across processes and restarts.
type Hub struct {
	mu   sync.Mutex // guards subs
	subs map[string]map[*hubSub]struct{}
}

type hubSub struct {
	ch           chan struct{}
	terminalOnly bool
	tail         *Tail // nil unless subscribed with SubscribeTail
}

// tailMax is the most entries a Tail keeps between two Takes; beyond, it turns blind.
const tailMax = 256

// Tail is a subscription to a run's changes that also receives the entries this process
// appended to its ledger. C receives a value (coalesced) after each change; Take returns what
// came since the last Take.
type Tail struct {
	C <-chan struct{}

	mu      sync.Mutex // guards entries and blind
	entries []*messages.LedgerEntry
	blind   bool
}

// Take returns the entries received since the last Take (in arrival order, which need not be
// Seq order) and whether they are every change since then (complete); when not, the reader
// must read the store to see the rest.
func (t *Tail) Take() (entries []*messages.LedgerEntry, complete bool) {
	t.mu.Lock()
	entries, complete = t.entries, !t.blind
	t.entries, t.blind = nil, false
	t.mu.Unlock()
	return entries, complete
}

func (t *Tail) add(entries []*messages.LedgerEntry) {
	t.mu.Lock()
	switch {
	case t.blind:
	case len(t.entries)+len(entries) > tailMax:
		t.entries, t.blind = nil, true
	default:
		t.entries = append(t.entries, entries...)
	}
	t.mu.Unlock()
}

func (t *Tail) lose() {
	t.mu.Lock()
	t.entries, t.blind = nil, true
	t.mu.Unlock()
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: make(map[string]map[*hubSub]struct{})} }

// Subscribe returns a channel that receives a value (coalesced) after each change of runID, and
// a cancel function that must be called once.
func (h *Hub) Subscribe(runID string) (<-chan struct{}, func()) {
	s, cancel := h.subscribe(runID, false, false)
	return s.ch, cancel
}

// SubscribeTerminal is Subscribe for only the changes that end a run.
func (h *Hub) SubscribeTerminal(runID string) (<-chan struct{}, func()) {
	s, cancel := h.subscribe(runID, true, false)
	return s.ch, cancel
}

// SubscribeTail is Subscribe that also receives the entries appended by this process, and a
// cancel function that must be called once.
func (h *Hub) SubscribeTail(runID string) (*Tail, func()) {
	s, cancel := h.subscribe(runID, false, true)
	return s.tail, cancel
}

func (h *Hub) subscribe(runID string, terminalOnly, tail bool) (*hubSub, func()) {
	s := &hubSub{ch: make(chan struct{}, 1), terminalOnly: terminalOnly}
	if tail {
		s.tail = &Tail{C: s.ch}
	}
	h.mu.Lock()
	m := h.subs[runID]
	if m == nil {
		m = make(map[*hubSub]struct{})
		h.subs[runID] = m
	}
	m[s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		delete(h.subs[runID], s)
		if len(h.subs[runID]) == 0 {
			delete(h.subs, runID)
		}
		h.mu.Unlock()
	}
}

// Notify wakes the subscribers of runID without blocking; terminal marks a change that ended
// the run. Tails learn that they missed a change.
func (h *Hub) Notify(runID string, terminal bool) { h.wake(runID, nil, terminal) }

// Appended wakes the subscribers of runID and hands entries (as the store wrote them, Seq set)
// to its tails, without blocking. The entries must not be modified afterwards.
func (h *Hub) Appended(runID string, entries []*messages.LedgerEntry) {
	terminal := false
	for _, e := range entries {
		terminal = terminal || ledger.IsTerminalKind(e.GetKind())
	}
	h.wake(runID, entries, terminal)
}

func (h *Hub) wake(runID string, entries []*messages.LedgerEntry, terminal bool) {
	h.mu.Lock()
	for s := range h.subs[runID] {
		if s.terminalOnly && !terminal {
			continue
		}
		if s.tail != nil {
			if entries == nil {
				s.tail.lose()
			} else {
				s.tail.add(entries)
			}
		}
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}
