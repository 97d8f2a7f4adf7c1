package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/store"
)

// LivenessLease names the lease that cluster member (an actor system id) renews while it
// runs: its heartbeat against the store, independent of gossip timing.
func LivenessLease(member string) string { return "alive/" + member }

// livenessProbeHolder prefixes the holder of the millisecond lease a checker takes to read
// whether a member's liveness lease is free.
const livenessProbeHolder = "probe:"

// RenewLiveness takes or renews this incarnation's liveness lease for ttl. It reports false
// when another holder had it (a checker found it lapsed and held it for a millisecond). It
// blocks on store I/O.
func (r *Recoverer) RenewLiveness(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := r.st.AcquireLease(ctx, LivenessLease(r.cfg.Incarnation), r.cfg.Incarnation, ttl)
	if err != nil {
		return false, fmt.Errorf("renew liveness lease: %w", err)
	}
	return ok, nil
}

// ReadLiveness reads member's liveness lease: free reports it lapsed (or never taken); until
// is when it lapses while held, or the zero time when the store cannot tell (it is no
// store.LeaseReader: the lease is then probed by taking it for a millisecond when free, which
// leaves nothing behind). It blocks on store I/O.
func (r *Recoverer) ReadLiveness(ctx context.Context, member string) (free bool, until time.Time, err error) {
	if lr, ok := r.st.(store.LeaseReader); ok {
		until, _, err := lr.LeaseExpiry(ctx, LivenessLease(member))
		if err != nil {
			return false, time.Time{}, fmt.Errorf("read liveness lease of %s: %w", member, err)
		}
		return until.IsZero(), until, nil
	}
	ok, err := r.st.AcquireLease(ctx, LivenessLease(member), livenessProbeHolder+r.cfg.Incarnation, time.Millisecond)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("read liveness lease of %s: %w", member, err)
	}
	return ok, time.Time{}, nil
}

// LivenessRules are the timings of JudgeMember.
type LivenessRules struct {
	// TTL is the liveness lease's length: a member that has not renewed it for TTL is lost.
	TTL time.Duration
	// Interval is how often members renew their lease and check their peers'.
	Interval time.Duration
}

// LivenessObservation is what a checker saw of one peer in one check, and of itself.
type LivenessObservation struct {
	// Now is the checker's clock.
	Now time.Time
	// HealthySince is since when every renewal of the checker's own lease succeeded on time
	// (zero: the last one failed, or came late).
	HealthySince time.Time
	// RenewedAt is when the checker's own lease was last renewed.
	RenewedAt time.Time
	// LeaseFree: the peer's liveness lease is free (lapsed, or never taken).
	LeaseFree bool
	// LeaseUntil is when the peer's lease lapses unless renewed (zero: free, or not known).
	LeaseUntil time.Time
	// Refused: a connection attempt to the peer's actor endpoint was refused (nothing listens
	// there any more: the process is gone).
	Refused bool
}

// MemberLiveness is what a checker keeps of one peer between checks.
type MemberLiveness struct {
	// SeenAlive: the peer's lease was once seen held. A peer never seen alive (it joined the
	// membership before taking its lease, or runs no liveness) is not judged.
	SeenAlive bool
}

// LivenessVerdict is the outcome of JudgeMember.
type LivenessVerdict int

// The verdicts of JudgeMember.
const (
	// MemberAlive: the peer renews its lease.
	MemberAlive LivenessVerdict = iota
	// MemberUnknown: nothing can be concluded (the peer was never seen alive, or the checker's
	// own view of the store is not to be trusted: after a store outage or a stall of its own,
	// every peer gets a TTL to renew before it is judged).
	MemberUnknown
	// MemberCrashed: the peer's endpoint refuses connections: its process is gone.
	MemberCrashed
	// MemberLapsed: the peer has not renewed its lease for a TTL while the checker's own
	// renewals went through: it is paused, partitioned from the store, or gone.
	MemberLapsed
)

// String returns the verdict's name.
func (v LivenessVerdict) String() string {
	switch v {
	case MemberAlive:
		return "alive"
	case MemberUnknown:
		return "unknown"
	case MemberCrashed:
		return "crashed"
	case MemberLapsed:
		return "lease-lapsed"
	}
	return "unknown"
}

// Lost reports whether the verdict declares the member lost.
func (v LivenessVerdict) Lost() bool { return v == MemberCrashed || v == MemberLapsed }

// JudgeMember decides, from one observation, whether a peer is lost, and returns what to keep
// of it for the next check. It is pure.
func JudgeMember(prev MemberLiveness, o LivenessObservation, rules LivenessRules) (LivenessVerdict, MemberLiveness) {
	switch {
	case !o.LeaseFree && !o.Refused:
		return MemberAlive, MemberLiveness{SeenAlive: true}
	case !prev.SeenAlive:
		return MemberUnknown, prev
	case o.Refused:
		return MemberCrashed, prev
	}
	// The lease is free. It says something only if the checker's own renewals went through
	// for a whole TTL up to now: the peer had as long to renew against the same store.
	selfOK := !o.HealthySince.IsZero() && o.Now.Sub(o.HealthySince) >= rules.TTL &&
		!o.RenewedAt.IsZero() && o.Now.Sub(o.RenewedAt) <= 2*rules.Interval
	if !selfOK {
		return MemberUnknown, prev
	}
	return MemberLapsed, prev
}

// NextHealthySince returns the checker's HealthySince after a renewal of its own lease at
// now that succeeded (ok) or not, given the previous renewal time: a failed renewal, or one
// later than the lease could bear (the checker itself stalled), starts it over. It is pure.
func NextHealthySince(since, lastRenewed, now time.Time, ok bool, rules LivenessRules) time.Time {
	switch {
	case !ok:
		return time.Time{}
	case since.IsZero() || lastRenewed.IsZero() || now.Sub(lastRenewed) >= rules.TTL:
		return now
	}
	return since
}

// LivenessCheckSlack is how long after a peer's lease is due to lapse its checker reads it
// again: the store judges a lease by the reader's clock, so the read finds it lapsed unless the
// peer renewed it meanwhile.
const LivenessCheckSlack = 5 * time.Millisecond

// NextLivenessCheck returns when a checker that looked at its peers at now looks again: one
// Interval later, or, when the lease of a peer is due to lapse before that (the peer stopped
// renewing it), LivenessCheckSlack after the first such lapse, so that a paused peer is judged
// as its lease lapses rather than up to an Interval later. untils are the peers' LeaseUntil
// (zero ones do not count; one that lapsed since it was read asks for a check at once). It is
// never sooner than LivenessCheckSlack after now, so no reading of the store can make the
// checker spin. It is pure.
func NextLivenessCheck(now time.Time, untils []time.Time, rules LivenessRules) time.Time {
	next := now.Add(rules.Interval)
	for _, u := range untils {
		if at := u.Add(LivenessCheckSlack); !u.IsZero() && at.Before(next) {
			next = at
		}
	}
	if soonest := now.Add(LivenessCheckSlack); next.Before(soonest) {
		return soonest
	}
	return next
}
