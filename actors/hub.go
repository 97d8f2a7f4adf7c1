package actors

import "sync"

// Hub tells in-process waiters that a shared run's ledger or status changed, so SSE streams and
// Await read the store at once instead of polling. It carries no data beyond whether the
// change was terminal: subscribers re-read the durable ledger, which keeps every reader correct
// across processes and restarts.
type Hub struct {
	mu   sync.Mutex // guards subs
	subs map[string]map[*hubSub]struct{}
}

type hubSub struct {
	ch           chan struct{}
	terminalOnly bool
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: make(map[string]map[*hubSub]struct{})} }

// Subscribe returns a channel that receives a value (coalesced) after each change of runID, and
// a cancel function that must be called once.
func (h *Hub) Subscribe(runID string) (<-chan struct{}, func()) { return h.subscribe(runID, false) }

// SubscribeTerminal is Subscribe for only the changes that end a run.
func (h *Hub) SubscribeTerminal(runID string) (<-chan struct{}, func()) {
	return h.subscribe(runID, true)
}

func (h *Hub) subscribe(runID string, terminalOnly bool) (<-chan struct{}, func()) {
	s := &hubSub{ch: make(chan struct{}, 1), terminalOnly: terminalOnly}
	h.mu.Lock()
	m := h.subs[runID]
	if m == nil {
		m = make(map[*hubSub]struct{})
		h.subs[runID] = m
	}
	m[s] = struct{}{}
	h.mu.Unlock()
	return s.ch, func() {
		h.mu.Lock()
		delete(h.subs[runID], s)
		if len(h.subs[runID]) == 0 {
			delete(h.subs, runID)
		}
		h.mu.Unlock()
	}
}

// Notify wakes the subscribers of runID without blocking; terminal marks a change that ended
// the run.
func (h *Hub) Notify(runID string, terminal bool) {
	h.mu.Lock()
	for s := range h.subs[runID] {
		if s.terminalOnly && !terminal {
			continue
		}
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}
