package actors

import (
	"sync/atomic"
	"time"
)

// deadlineTick is the resolution of the local callers' deadlines: a send's TIMEOUT comes at
// most this late.
const deadlineTick = 5 * time.Millisecond

// deadlineSlots is the size of the wheel: deadlines up to deadlineSlots × deadlineTick ahead
// (about 41 s, past the default 30 s RPC timeout) wait on their own slot, later ones on the
// last slot and then again.
const deadlineSlots = 8192

// deadlineWheel lets the node's waiting callers share one channel per deadlineTick of deadline
// instead of arming a timer each: a caller waits on the channel of the tick its deadline falls
// in, and one ticker goroutine closes the channels of the ticks that passed. Only the callers
// whose deadline came are woken. It is goroutine-safe.
type deadlineWheel struct {
	slots [deadlineSlots]atomic.Pointer[deadlineSlot]
	// closed is the last tick whose slot the ticker closed.
	closed atomic.Int64
	// stopped is set, and stopCh closed, when the runtime stops: every waiter wakes, and wait
	// returns stopCh from then on.
	stopped atomic.Bool
	stopCh  chan struct{}
}

// deadlineSlot is the channel of one tick, closed when that tick passed.
type deadlineSlot struct {
	tick int64
	ch   chan struct{}
}

func newDeadlineWheel(now time.Time) *deadlineWheel {
	w := &deadlineWheel{stopCh: make(chan struct{})}
	w.closed.Store(now.UnixNano() / int64(deadlineTick))
	return w
}

// wait returns a channel that is closed once deadline passed (or, for a deadline beyond the
// wheel, once the wheel's horizon passed: the caller checks the time and waits again) or the
// wheel stopped (the caller checks that first), or nil when the caller must use a timer (the
// deadline's tick was closed while it asked).
func (w *deadlineWheel) wait(deadline time.Time) <-chan struct{} {
	if w.stopped.Load() {
		return w.stopCh
	}
	tick := deadline.UnixNano()/int64(deadlineTick) + 1 // the first tick wholly after the deadline
	closed := w.closed.Load()
	if tick <= closed {
		return nil
	}
	tick = min(tick, closed+deadlineSlots-1)
	p := &w.slots[tick%deadlineSlots]
	for {
		s := p.Load()
		if s != nil && s.tick == tick {
			if w.stopped.Load() { // stop may have swept this index before s was swapped in
				return w.stopCh
			}
			return s.ch
		}
		if s != nil && s.tick > tick { // our tick passed while we looked: the timer fires at once
			return nil
		}
		next := &deadlineSlot{tick: tick, ch: make(chan struct{})}
		if p.CompareAndSwap(s, next) {
			if s != nil {
				close(s.ch) // a passed tick the ticker had not reached yet: whoever swaps it out closes it
			}
			if w.closed.Load() >= tick { // the ticker may have passed the slot before the swap
				return nil
			}
			if w.stopped.Load() {
				return w.stopCh
			}
			return next.ch
		}
	}
}

// advance closes the slots of every tick up to now's (the ticker only). It publishes the
// closed tick first: a caller that swaps a slot in after that sees it and does not wait on it,
// and one that swapped it in before is found by the loop.
func (w *deadlineWheel) advance(now time.Time) {
	last := now.UnixNano() / int64(deadlineTick)
	from := w.closed.Load() + 1
	if last-from >= deadlineSlots {
		from = last - deadlineSlots + 1
	}
	w.closed.Store(last)
	for t := from; t <= last; t++ {
		p := &w.slots[t%deadlineSlots]
		if s := p.Load(); s != nil && s.tick <= t && p.CompareAndSwap(s, nil) {
			close(s.ch)
		}
	}
}

// stop wakes every waiter and makes later waits return at once (the runtime stopped). It is
// idempotent. A wait that swapped its slot in after the sweep passed its index sees stopped
// and returns stopCh instead.
func (w *deadlineWheel) stop() {
	if w.stopped.Swap(true) {
		return
	}
	close(w.stopCh)
	for i := range w.slots {
		if s := w.slots[i].Load(); s != nil && w.slots[i].CompareAndSwap(s, nil) {
			close(s.ch)
		}
	}
}
