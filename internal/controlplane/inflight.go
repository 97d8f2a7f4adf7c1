package controlplane

import (
	"context"
	"sync"

	"github.com/dairuntime/dair/internal/admission"
	"github.com/dairuntime/dair/messages"
)

// inflight counts the slots this dispatcher has chosen and is still writing the hold of, per
// instance. Decisions add them to the holds they read, so the concurrent dispatches of a cycle
// (and hand-offs) do not all choose the last free slot and lose it to one another: without it
// every waiting run of a cycle tried the slot a finished run freed, the one whose write landed
// first took it (not the oldest), and each loser wrote the same admission and reservation
// entries again. Goroutine-safe.
type inflight struct {
	mu      sync.Mutex
	n       map[string]int // guarded by mu
	changed chan struct{}  // closed (and replaced) when a slot in flight is uncounted; guarded by mu
}

func newInflight() *inflight { return &inflight{n: map[string]int{}, changed: make(chan struct{})} }

// add adds the slots in flight to reserved, a caller-owned map of holds by instance.
func (f *inflight) add(reserved map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.n {
		reserved[id] += n
	}
}

// count returns the slots of instance id in flight.
func (f *inflight) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[id]
}

// take counts a slot of x in flight when x has room beyond the held holds (the store's count,
// without the slots in flight) and those in flight; release uncounts it once the hold's write
// answered (the holds the view reads include it from then on). When x has no room but slots
// of it are in flight, ok is false and busy is closed once one of them is uncounted: the
// caller decides again then, on counts that include it (a run does not give up on a slot an
// earlier run of its cycle may yet lose). With none in flight, busy is nil: x is full.
func (f *inflight) take(x *messages.CapacityDescriptor, held int) (release func(), busy <-chan struct{}, ok bool) {
	id := x.GetRuntimeInstanceId()
	f.mu.Lock()
	defer f.mu.Unlock()
	if admission.EffectiveAvailableRunSlots(x, held+f.n[id]) <= 0 {
		if f.n[id] > 0 {
			busy = f.changed
		}
		return func() {}, busy, false
	}
	f.n[id]++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.n[id]--; f.n[id] <= 0 {
				delete(f.n, id)
			}
			close(f.changed)
			f.changed = make(chan struct{})
		})
	}, nil, true
}

// maxBusyWaits bounds how often one dispatch waits for slots in flight (take's busy).
const maxBusyWaits = 8

// awaitBusy waits for busy or ctx and reports whether the caller may decide again.
func awaitBusy(ctx context.Context, busy <-chan struct{}) bool {
	select {
	case <-busy:
		return true
	case <-ctx.Done():
		return false
	}
}

// turn orders the capacity decisions of one cycle's runs: a run decides after the run claimed
// before it took a slot (counted in flight) or settled for waiting, so a tenant's runs take
// free slots in their queue order (the fair plan's order across tenants) while their store
// writes and deliveries still overlap. Once a run of a tenant settled for waiting, the
// tenant's later runs of the cycle wait for the same reason without a decision of their own
// (blocked): the run ahead of them cannot go. A nil turn waits for nothing and blocks nothing.
type turn struct {
	prev  <-chan struct{} // closed when the previous run decided; nil for the first
	done  chan struct{}
	once  sync.Once
	cycle *cycleWaits
}

// cycleWaits is what the runs of one cycle learned: the tenants whose run settled for waiting,
// with the reason.
type cycleWaits struct {
	mu      sync.Mutex
	blocked map[string]string // tenant -> wait reason; guarded by mu
}

// turns returns n turns of one cycle chained in order.
func turns(n int) []*turn {
	out := make([]*turn, n)
	var prev <-chan struct{}
	cw := &cycleWaits{blocked: map[string]string{}}
	for i := range out {
		out[i] = &turn{prev: prev, done: make(chan struct{}), cycle: cw}
		prev = out[i].done
	}
	return out
}

// wait blocks until the previous run decided or ctx ends.
func (t *turn) wait(ctx context.Context) {
	if t == nil || t.prev == nil {
		return
	}
	select {
	case <-t.prev:
	case <-ctx.Done():
	}
}

// pass lets the next run decide; later calls do nothing.
func (t *turn) pass() {
	if t != nil {
		t.once.Do(func() { close(t.done) })
	}
}

// block records that a run of tenant settled for waiting for reason, then passes.
func (t *turn) block(tenant, reason string) {
	if t == nil {
		return
	}
	t.cycle.mu.Lock()
	if _, ok := t.cycle.blocked[tenant]; !ok {
		t.cycle.blocked[tenant] = reason
	}
	t.cycle.mu.Unlock()
	t.pass()
}

// blocked returns the reason a run of tenant ahead of this one settled for waiting this cycle.
func (t *turn) blocked(tenant string) (string, bool) {
	if t == nil {
		return "", false
	}
	t.cycle.mu.Lock()
	defer t.cycle.mu.Unlock()
	reason, ok := t.cycle.blocked[tenant]
	return reason, ok
}
