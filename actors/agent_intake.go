package actors

import "sync"

// agentIntake is a queue of items handed to one actor past its mailbox: producers append under a
// mutex, and only the one that finds no wake-up pending posts one (a message to the actor), so a
// burst of items costs the actor one mailbox message and run instead of one each, and no
// allocation per item. The actor takes everything queued when the wake-up arrives. Items are
// taken in the order they were pushed. It is goroutine-safe.
//
// An item pushed before a wake-up was posted is taken by that wake-up or an earlier take: an
// actor that must see an item before some later message (an answer to what the item started)
// must get the item through its mailbox instead.
type agentIntake[T any] struct {
	mu    sync.Mutex // guards items, woken
	items []T
	woken bool // a wake-up was posted and not taken yet
}

// push queues it and reports whether the caller must post the wake-up.
func (q *agentIntake[T]) push(it T) (wake bool) {
	q.mu.Lock()
	q.items = append(q.items, it)
	wake = !q.woken
	q.woken = true
	q.mu.Unlock()
	return wake
}

// take returns the queued items, in order, and queues the next ones in spare's array (spare's
// items are cleared first); a wake-up posted after it is needed again. The caller owns the
// returned slice and hands it back as the spare of a later take once done with its items.
func (q *agentIntake[T]) take(spare []T) []T {
	clear(spare)
	q.mu.Lock()
	out := q.items
	q.items, q.woken = spare[:0], false
	q.mu.Unlock()
	return out
}
