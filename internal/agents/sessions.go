package agents

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/messages"
)

// Sessions is a router's pending-session table (seed 003's RPC session table): one session per
// request sent to a worker, with the caller's deadline and the RPC deadline. A session resolves
// exactly once: with the worker's outcome (Resolve), as TIMEOUT when its deadline passes
// (Expire), or as UNDELIVERABLE when its worker is evicted (EvictWorker) or the router stops
// (FailAll). A session that timed out stays in the table, no longer pending, until the worker
// answers or the RPC deadline passes: an answer is then dropped, a missed RPC deadline marks the
// worker unhealthy, and a later eviction leaves its TIMEOUT unchanged.
//
// Each session carries a value of type T for the caller (a reply channel, a publish call). The
// table is pure state, not safe for concurrent use: the router's actor owns it.
type Sessions[T any] struct {
	m       map[uint64]session[T] // by value: no allocation per session
	next    uint64
	pending int
	// wake is a lower bound of the earliest deadline in the table (zero: none); Expire scans
	// only when now reaches it.
	wake time.Time
}

type session[T any] struct {
	worker      string
	deadline    time.Time
	rpcDeadline time.Time
	timedOut    bool
	value       T
}

// Resolution is one session resolved, with the outcome its caller gets.
type Resolution[T any] struct {
	ID      uint64
	Worker  string
	Value   T
	Outcome *messages.DeliveryOutcome
}

// NewSessions returns an empty table.
func NewSessions[T any]() *Sessions[T] {
	return &Sessions[T]{m: map[uint64]session[T]{}}
}

// Open records a request sent to worker at now, answered by deadline at the latest for its
// caller (a zero deadline means now + rpcTimeout) and by now + rpcTimeout for the worker's
// health, and returns its id (never 0).
func (s *Sessions[T]) Open(worker string, value T, now, deadline time.Time, rpcTimeout time.Duration) uint64 {
	s.next++
	s.open(s.next, worker, value, now, deadline, rpcTimeout)
	return s.next
}

func (s *Sessions[T]) open(id uint64, worker string, value T, now, deadline time.Time, rpcTimeout time.Duration) {
	rpc := now.Add(rpcTimeout)
	if deadline.IsZero() {
		deadline = rpc
	}
	s.m[id] = session[T]{worker: worker, deadline: deadline, rpcDeadline: rpc, value: value}
	s.pending++
	if first := earliest(deadline, rpc); s.wake.IsZero() || first.Before(s.wake) {
		s.wake = first
	}
}

// CallerSessions marks the session ids a router's callers choose themselves (OpenID): the ids
// with this bit set, which Open never returns.
const CallerSessions = uint64(1) << 63

// OpenID is Open with the id chosen by the caller (a sender that sends its request itself and
// has the router track it): id must have the CallerSessions bit and not be in the table.
func (s *Sessions[T]) OpenID(id uint64, worker string, value T, now, deadline time.Time, rpcTimeout time.Duration) error {
	if _, dup := s.m[id]; id&CallerSessions == 0 || dup {
		return fmt.Errorf("%w: %#x", ErrSessionID, id)
	}
	s.open(id, worker, value, now, deadline, rpcTimeout)
	return nil
}

// Resolve applies the worker's outcome to session id. It returns the resolution when the
// session was pending; false for a session that already timed out (the late answer is dropped)
// or an unknown one.
func (s *Sessions[T]) Resolve(id uint64, o *messages.DeliveryOutcome) (Resolution[T], bool) {
	e, ok := s.m[id]
	if !ok {
		return Resolution[T]{}, false
	}
	delete(s.m, id)
	if e.timedOut {
		return Resolution[T]{}, false
	}
	s.pending--
	return Resolution[T]{ID: id, Worker: e.worker, Value: e.value, Outcome: o}, true
}

// Expire times out the pending sessions whose deadline is at or before now (TIMEOUT,
// ReasonDeadlineExceeded), and forgets the sessions whose RPC deadline passed, returning their
// workers (each once, in first-seen order) to be marked unhealthy.
func (s *Sessions[T]) Expire(now time.Time) (timeouts []Resolution[T], unhealthy []string) {
	if s.wake.IsZero() || now.Before(s.wake) {
		return nil, nil
	}
	s.wake = time.Time{}
	seen := map[string]bool{}
	for id, e := range s.m {
		if !e.timedOut && !now.Before(earliest(e.deadline, e.rpcDeadline)) {
			e.timedOut = true
			s.m[id] = e
			s.pending--
			why := "no reply from worker %s before the deadline"
			if !now.Before(e.rpcDeadline) {
				why = "no reply from worker %s within the RPC timeout"
			}
			timeouts = append(timeouts, Resolution[T]{ID: id, Worker: e.worker, Value: e.value,
				Outcome: TimedOut(Reason(ReasonDeadlineExceeded, why, e.worker), e.worker)})
		}
		if !now.Before(e.rpcDeadline) {
			delete(s.m, id)
			if !seen[e.worker] {
				seen[e.worker] = true
				unhealthy = append(unhealthy, e.worker)
			}
			continue
		}
		next := e.rpcDeadline
		if !e.timedOut {
			next = earliest(e.deadline, next)
		}
		if s.wake.IsZero() || next.Before(s.wake) {
			s.wake = next
		}
	}
	return timeouts, unhealthy
}

// EvictWorker resolves every pending session of worker as UNDELIVERABLE (ReasonWorkerEvicted,
// with why) and forgets its timed-out sessions, which stay TIMEOUT.
func (s *Sessions[T]) EvictWorker(worker, why string) []Resolution[T] {
	var out []Resolution[T]
	for id, e := range s.m {
		if e.worker != worker {
			continue
		}
		delete(s.m, id)
		if e.timedOut {
			continue
		}
		s.pending--
		out = append(out, Resolution[T]{ID: id, Worker: worker, Value: e.value,
			Outcome: Undeliverable(Reason(ReasonWorkerEvicted, "worker %s %s", worker, why), worker)})
	}
	return out
}

// FailAll resolves every pending session as UNDELIVERABLE (ReasonStopping) and empties the table.
func (s *Sessions[T]) FailAll(why string) []Resolution[T] {
	var out []Resolution[T]
	for id, e := range s.m {
		if !e.timedOut {
			out = append(out, Resolution[T]{ID: id, Worker: e.worker, Value: e.value,
				Outcome: Undeliverable(Reason(ReasonStopping, "%s", why), e.worker)})
		}
	}
	clear(s.m)
	s.pending, s.wake = 0, time.Time{}
	return out
}

// Pending returns the number of unresolved sessions: the router is idle when it is 0.
func (s *Sessions[T]) Pending() int { return s.pending }

// Len returns the number of sessions held, pending or timed out awaiting their worker.
func (s *Sessions[T]) Len() int { return len(s.m) }

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
