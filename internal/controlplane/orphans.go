package controlplane

import "time"

// Hold is what the recoverer knows of the slot hold an active run has on its instance: the
// time the hold lapses (zero: there is none), read from the store.
type Hold struct {
	Until time.Time
}

// lastRefresh is when the instance last extended the hold (the pump's reservation and every
// refresh set it to ttl from then).
func (h Hold) lastRefresh(ttl time.Duration) time.Time {
	if h.Until.IsZero() {
		return time.Time{}
	}
	return h.Until.Add(-ttl)
}

// Suspicion is an active run on a live instance whose hold was found stale: when it was first
// found so, and the hold seen then. The recoverer keeps one per suspect run between rounds.
type Suspicion struct {
	Since time.Time
	Hold  Hold
}

// OrphanVerdict is the outcome of JudgeOrphan.
type OrphanVerdict int

// The verdicts of JudgeOrphan.
const (
	// OrphanHeld: the instance refreshed the hold lately, so it runs (or queues) the run.
	OrphanHeld OrphanVerdict = iota
	// OrphanSuspect: the hold is stale, but not yet for long enough since it was first seen
	// stale (a store outage also stops refreshes: the instance gets a chance to catch up).
	OrphanSuspect
	// OrphanLost: the instance has not held the run for a while although the store answered:
	// no execution of the run is alive anywhere, and the run must be recovered.
	OrphanLost
)

// String returns the verdict's name.
func (v OrphanVerdict) String() string {
	switch v {
	case OrphanHeld:
		return "held"
	case OrphanSuspect:
		return "suspect"
	case OrphanLost:
		return "lost"
	}
	return "unknown"
}

// OrphanRules are the timings of JudgeOrphan.
type OrphanRules struct {
	// TTL is the length of a hold (the reservation TTL: the pump reserves, and instances
	// refresh, to TTL from now).
	TTL time.Duration
	// Stale is how long after its last refresh a hold counts as stale: an instance refreshes
	// the holds of every run it has at each heartbeat, so two heartbeats and some slack.
	Stale time.Duration
	// Confirm is how long a hold must stay stale and unchanged, from when it was first seen
	// stale, before the run counts as lost: a heartbeat and some slack, so that an instance
	// that could not write for a while (the store was down) refreshes first.
	Confirm time.Duration
}

// JudgeOrphan decides about a run that is active (dispatched, running or paused) on an
// instance the registry shows live: whether the instance still has it, judged by the slot
// hold the instance extends at every heartbeat for every run it has, queued or running. prev
// is the suspicion of an earlier round (nil: none). It returns the verdict and the suspicion
// to keep (nil when the run is held). It is pure.
func JudgeOrphan(now time.Time, h Hold, prev *Suspicion, rules OrphanRules) (OrphanVerdict, *Suspicion) {
	if last := h.lastRefresh(rules.TTL); !last.IsZero() && now.Sub(last) <= rules.Stale {
		return OrphanHeld, nil
	}
	if prev == nil || !prev.Hold.Until.Equal(h.Until) || now.Before(prev.Since) {
		return OrphanSuspect, &Suspicion{Since: now, Hold: h}
	}
	if now.Sub(prev.Since) < rules.Confirm {
		return OrphanSuspect, prev
	}
	return OrphanLost, prev
}
