package storetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var registryTests = []contractTest{
	{"PutInstance_upsert", testPutInstanceUpsert},
	{"PutInstance_refusesDeadMember", testPutInstanceDeadMember},
	{"GetInstance_expiry", testInstanceExpiry},
	{"DeleteInstance_idempotent", testDeleteInstance},
}

var reservationTests = []contractTest{
	{"Reserve_limit", testReserveLimit},
	{"Reserve_expiry", testReserveExpiry},
	{"ReservationExpiries_many", testReservationExpiriesMany},
	{"Reserve_concurrent", testReserveConcurrent},
	{"RefreshReservations_extends", testRefreshReservations},
}

var leaseTests = []contractTest{
	{"AcquireLease_exclusive", testLeaseExclusive},
	{"AcquireLease_takeoverAfterExpiry", testLeaseTakeover},
	{"ReleaseLease_onlyHolder", testLeaseRelease},
	{"LeaseExpiry_readsWithoutTaking", testLeaseExpiry},
}

func instance(id string, slots int32) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, Status: messages.InstanceReady,
		AvailableRunSlots: slots, Metadata: map[string]string{"zone": "a"}}
}

func instanceID(d *messages.CapacityDescriptor) string { return d.GetRuntimeInstanceId() }

func testPutInstanceUpsert(t *testing.T, e *env) {
	noErr(t, e.st.PutInstance(e.ctx, instance("i2", 1), time.Minute))
	noErr(t, e.st.PutInstance(e.ctx, instance("i1", 1), time.Minute))
	noErr(t, e.st.PutInstance(e.ctx, instance("i1", 5), time.Minute))
	got, err := e.st.GetInstance(e.ctx, "i1")
	noErr(t, err)
	equal(t, "slots", got.GetAvailableRunSlots(), int32(5))
	equal(t, "metadata", got.GetMetadata()["zone"], "a")
	list, err := e.st.ListInstances(e.ctx)
	noErr(t, err)
	equalIDs(t, "instances", ids(list, instanceID), []string{"i1", "i2"})
	_, err = e.st.GetInstance(e.ctx, "missing")
	isErr(t, err, store.ErrNotFound)
}

// testPutInstanceDeadMember: a tombstoned member cannot publish; other members, a member's own
// probe of its tombstone (another holder) and an expired tombstone do not block.
func testPutInstanceDeadMember(t *testing.T, e *env) {
	of := func(id, member string) *messages.CapacityDescriptor {
		d := instance(id, 1)
		d.NodeId = member
		return d
	}
	noErr(t, e.st.PutInstance(e.ctx, of("i1", "m1"), time.Minute))
	ok, err := e.st.AcquireLease(e.ctx, store.TombstoneLease("m1"), store.TombstoneHolderPrefix+"m2", time.Hour)
	noErr(t, err)
	equal(t, "tombstone taken", ok, true)
	isErr(t, e.st.PutInstance(e.ctx, of("i1", "m1"), time.Minute), store.ErrMemberDead)
	isErr(t, e.st.PutInstance(e.ctx, of("i9", "m1"), time.Minute), store.ErrMemberDead)
	_, err = e.st.GetInstance(e.ctx, "i9")
	isErr(t, err, store.ErrNotFound)
	noErr(t, e.st.PutInstance(e.ctx, of("i1", "m2"), time.Minute)) // the id moves to a live member
	got, err := e.st.GetInstance(e.ctx, "i1")
	noErr(t, err)
	equal(t, "owner", got.GetNodeId(), "m2")
	// A member checking for its own tombstone holds the lease briefly under its own name.
	ok, err = e.st.AcquireLease(e.ctx, store.TombstoneLease("m3"), "m3", time.Minute)
	noErr(t, err)
	equal(t, "probe lease", ok, true)
	noErr(t, e.st.PutInstance(e.ctx, of("i3", "m3"), time.Minute))
	e.clock.Advance(2 * time.Hour)
	noErr(t, e.st.PutInstance(e.ctx, of("i1", "m1"), time.Minute)) // the tombstone expired
}

func testInstanceExpiry(t *testing.T, e *env) {
	noErr(t, e.st.PutInstance(e.ctx, instance("short", 1), 10*time.Second))
	noErr(t, e.st.PutInstance(e.ctx, instance("long", 1), time.Minute))
	e.clock.Advance(9 * time.Second)
	_, err := e.st.GetInstance(e.ctx, "short")
	noErr(t, err)
	e.clock.Advance(2 * time.Second)
	_, err = e.st.GetInstance(e.ctx, "short")
	isErr(t, err, store.ErrNotFound)
	list, err := e.st.ListInstances(e.ctx)
	noErr(t, err)
	equalIDs(t, "live instances", ids(list, instanceID), []string{"long"})
	// A heartbeat brings an expired instance back.
	noErr(t, e.st.PutInstance(e.ctx, instance("short", 1), 10*time.Second))
	list, err = e.st.ListInstances(e.ctx)
	noErr(t, err)
	equalIDs(t, "after heartbeat", ids(list, instanceID), []string{"long", "short"})
}

func testDeleteInstance(t *testing.T, e *env) {
	noErr(t, e.st.PutInstance(e.ctx, instance("i1", 1), time.Minute))
	noErr(t, e.st.DeleteInstance(e.ctx, "i1"))
	noErr(t, e.st.DeleteInstance(e.ctx, "i1"))
	_, err := e.st.GetInstance(e.ctx, "i1")
	isErr(t, err, store.ErrNotFound)
}

func reserve(t *testing.T, e *env, inst, runID string, limit int, ttl time.Duration) bool {
	t.Helper()
	ok, err := e.st.Reserve(e.ctx, inst, runID, limit, ttl)
	noErr(t, err)
	return ok
}

func reservationCount(t *testing.T, e *env, inst string) int {
	t.Helper()
	n, err := e.st.ReservationCount(e.ctx, inst)
	noErr(t, err)
	return n
}

func testReserveLimit(t *testing.T, e *env) {
	equal(t, "r1", reserve(t, e, "i1", "r1", 2, time.Minute), true)
	equal(t, "r2", reserve(t, e, "i1", "r2", 2, time.Minute), true)
	equal(t, "r3 over limit", reserve(t, e, "i1", "r3", 2, time.Minute), false)
	equal(t, "r1 again", reserve(t, e, "i1", "r1", 2, time.Minute), true)
	equal(t, "other instance", reserve(t, e, "i2", "r3", 2, time.Minute), true)
	equal(t, "count i1", reservationCount(t, e, "i1"), 2)
	noErr(t, e.st.ReleaseReservation(e.ctx, "i1", "r2"))
	noErr(t, e.st.ReleaseReservation(e.ctx, "i1", "missing"))
	equal(t, "count after release", reservationCount(t, e, "i1"), 1)
	equal(t, "r3 after release", reserve(t, e, "i1", "r3", 2, time.Minute), true)
	equal(t, "count unknown", reservationCount(t, e, "nobody"), 0)
}

func reservationHeld(t *testing.T, e *env, inst, runID string) bool {
	t.Helper()
	return !reservationExpiry(t, e, inst, runID).IsZero()
}

func reservationExpiry(t *testing.T, e *env, inst, runID string) time.Time {
	t.Helper()
	until, err := e.st.ReservationExpiries(e.ctx, inst, []string{runID})
	noErr(t, err)
	equal(t, "expiries of one run", len(until), 1)
	return until[0]
}

func testReserveExpiry(t *testing.T, e *env) {
	equal(t, "r1", reserve(t, e, "i1", "r1", 1, 10*time.Second), true)
	equal(t, "r1 held", reservationHeld(t, e, "i1", "r1"), true)
	equal(t, "r1 lapses", reservationExpiry(t, e, "i1", "r1").Sub(e.clock.Now()).Round(time.Millisecond), 10*time.Second)
	equal(t, "r1 held elsewhere", reservationHeld(t, e, "i2", "r1"), false)
	equal(t, "r9 never reserved", reservationHeld(t, e, "i1", "r9"), false)
	e.clock.Advance(9 * time.Second)
	equal(t, "r2 while r1 live", reserve(t, e, "i1", "r2", 1, 10*time.Second), false)
	e.clock.Advance(2 * time.Second)
	equal(t, "count after expiry", reservationCount(t, e, "i1"), 0)
	equal(t, "r1 held after expiry", reservationHeld(t, e, "i1", "r1"), false)
	equal(t, "r2 after expiry", reserve(t, e, "i1", "r2", 1, 10*time.Second), true)
	// Re-reserving refreshes the hold.
	e.clock.Advance(8 * time.Second)
	equal(t, "r2 refresh", reserve(t, e, "i1", "r2", 1, 10*time.Second), true)
	equal(t, "r2 refreshed lapses", reservationExpiry(t, e, "i1", "r2").Sub(e.clock.Now()).Round(time.Millisecond), 10*time.Second)
	e.clock.Advance(8 * time.Second)
	equal(t, "r3 while r2 refreshed", reserve(t, e, "i1", "r3", 1, 10*time.Second), false)
}

// testReservationExpiries_many: one call answers for many runs, in their order: a live hold's
// expiry, zero for a lapsed hold, a hold on another instance and a run never reserved; no runs
// is an empty answer.
func testReservationExpiriesMany(t *testing.T, e *env) {
	equal(t, "r1", reserve(t, e, "i1", "r1", 10, 10*time.Second), true)
	equal(t, "r2", reserve(t, e, "i1", "r2", 10, 2*time.Second), true)
	equal(t, "r3", reserve(t, e, "i1", "r3", 10, 30*time.Second), true)
	equal(t, "r4 elsewhere", reserve(t, e, "i2", "r4", 10, 10*time.Second), true)
	e.clock.Advance(3 * time.Second) // r2 lapsed
	got, err := e.st.ReservationExpiries(e.ctx, "i1", []string{"r3", "r2", "r4", "never", "r1"})
	noErr(t, err)
	equal(t, "answers", len(got), 5)
	left := func(i int) time.Duration { return got[i].Sub(e.clock.Now()).Round(time.Millisecond) }
	equal(t, "r3 lapses", left(0), 27*time.Second)
	equal(t, "r2 lapsed", got[1].IsZero(), true)
	equal(t, "r4 is held on i2 only", got[2].IsZero(), true)
	equal(t, "never reserved", got[3].IsZero(), true)
	equal(t, "r1 lapses", left(4), 7*time.Second)
	none, err := e.st.ReservationExpiries(e.ctx, "i1", nil)
	noErr(t, err)
	equal(t, "no runs", len(none), 0)
}

func testReserveConcurrent(t *testing.T, e *env) {
	const goroutines, limit, rounds = 16, 3, 5
	for round := range rounds {
		var granted atomic.Int64
		var held [goroutines]bool
		runConcurrently(t, goroutines, func(i int) error {
			ok, err := e.st.Reserve(e.ctx, "i1", fmt.Sprintf("round%d-run%d", round, i), limit, time.Minute)
			if ok {
				granted.Add(1)
				held[i] = true
			}
			return err
		})
		if g := granted.Load(); g != limit {
			t.Fatalf("round %d: %d holds granted, want exactly %d", round, g, limit)
		}
		equal(t, "count", reservationCount(t, e, "i1"), limit)
		for i, h := range held {
			if h {
				noErr(t, e.st.ReleaseReservation(e.ctx, "i1", fmt.Sprintf("round%d-run%d", round, i)))
			}
		}
		equal(t, "count after release", reservationCount(t, e, "i1"), 0)
	}
}

func testRefreshReservations(t *testing.T, e *env) {
	equal(t, "r1", reserve(t, e, "i1", "r1", 3, 10*time.Second), true)
	equal(t, "r2", reserve(t, e, "i1", "r2", 3, 10*time.Second), true)
	e.clock.Advance(8 * time.Second)
	noErr(t, e.st.RefreshReservations(e.ctx, "i1", []string{"r1"}, 10*time.Second))
	e.clock.Advance(8 * time.Second)
	equal(t, "count", reservationCount(t, e, "i1"), 1)
	equal(t, "r3", reserve(t, e, "i1", "r3", 2, 10*time.Second), true)
	equal(t, "r4 over limit", reserve(t, e, "i1", "r4", 2, 10*time.Second), false)
}

func acquire(t *testing.T, e *env, name, holder string, ttl time.Duration) bool {
	t.Helper()
	ok, err := e.st.AcquireLease(e.ctx, name, holder, ttl)
	noErr(t, err)
	return ok
}

func testLeaseExclusive(t *testing.T, e *env) {
	equal(t, "a acquires", acquire(t, e, "pump", "a", 10*time.Second), true)
	equal(t, "b blocked", acquire(t, e, "pump", "b", 10*time.Second), false)
	equal(t, "a renews", acquire(t, e, "pump", "a", 10*time.Second), true)
	equal(t, "other name", acquire(t, e, "gc", "b", 10*time.Second), true)
}

func testLeaseTakeover(t *testing.T, e *env) {
	equal(t, "a acquires", acquire(t, e, "pump", "a", 10*time.Second), true)
	e.clock.Advance(8 * time.Second)
	equal(t, "a renews", acquire(t, e, "pump", "a", 10*time.Second), true)
	e.clock.Advance(8 * time.Second)
	equal(t, "b blocked after renew", acquire(t, e, "pump", "b", 10*time.Second), false)
	e.clock.Advance(3 * time.Second)
	equal(t, "b takes over", acquire(t, e, "pump", "b", 10*time.Second), true)
	equal(t, "a blocked", acquire(t, e, "pump", "a", 10*time.Second), false)
}

func testLeaseRelease(t *testing.T, e *env) {
	equal(t, "a acquires", acquire(t, e, "pump", "a", time.Minute), true)
	noErr(t, e.st.ReleaseLease(e.ctx, "pump", "b"))
	equal(t, "b still blocked", acquire(t, e, "pump", "b", time.Minute), false)
	noErr(t, e.st.ReleaseLease(e.ctx, "pump", "a"))
	equal(t, "b after release", acquire(t, e, "pump", "b", time.Minute), true)
	noErr(t, e.st.ReleaseLease(e.ctx, "missing", "a"))
}

// testLeaseExpiry: a held lease reads as its holder and deadline (the store's clock plus the
// TTL), a free one (never taken, lapsed, released) as the zero time; reading takes nothing.
func testLeaseExpiry(t *testing.T, e *env) {
	lr, ok := e.st.(store.LeaseReader)
	if !ok {
		t.Skip("backend has no store.LeaseReader")
	}
	read := func(what string, wantUntil time.Time, wantHolder string) {
		t.Helper()
		until, holder, err := lr.LeaseExpiry(e.ctx, "alive/m1")
		noErr(t, err)
		equal(t, what+": until", until.UnixMicro(), wantUntil.UnixMicro())
		equal(t, what+": holder", holder, wantHolder)
	}
	read("never taken", time.Time{}, "")
	equal(t, "a acquires", acquire(t, e, "alive/m1", "a", time.Second), true)
	read("held", e.clock.Now().Add(time.Second), "a")
	equal(t, "b still blocked after the read", acquire(t, e, "alive/m1", "b", time.Second), false)
	e.clock.Advance(999 * time.Millisecond)
	read("about to lapse", e.clock.Now().Add(time.Millisecond), "a")
	e.clock.Advance(time.Millisecond)
	read("lapsed", time.Time{}, "")
	equal(t, "a renews", acquire(t, e, "alive/m1", "a", time.Second), true)
	noErr(t, e.st.ReleaseLease(e.ctx, "alive/m1", "a"))
	read("released", time.Time{}, "")
}
