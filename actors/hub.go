package actors

import "sync"

// Hub tells in-process waiters that a shared run's ledger or status changed, so SSE streams and
// Await read the store at once instead of polling. It carries no data: subscribers re-read the
// durable ledger, which keeps every reader correct across processes and restarts.
type Hub struct {
	mu   sync.Mutex // guards subs
	subs map[string]map[chan struct{}]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: make(map[string]map[chan struct{}]struct{})} }

// Subscribe returns a channel that receives a value (coalesced) after each change of runID, and
// a cancel function that must be called once.
func (h *Hub) Subscribe(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	m := h.subs[runID]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		h.subs[runID] = m
	}
	m[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[runID], ch)
		if len(h.subs[runID]) == 0 {
			delete(h.subs, runID)
		}
		h.mu.Unlock()
	}
}

// Notify wakes every subscriber of runID without blocking.
func (h *Hub) Notify(runID string) {
	h.mu.Lock()
	for ch := range h.subs[runID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}
