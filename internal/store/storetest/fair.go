package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
)

var tenantQueueTests = []contractTest{
	{"Enqueue_filesUnderRunTenant", testEnqueueFilesUnderTenant},
	{"ClaimTenants_perTenantFIFO", testClaimTenantsFIFO},
	{"Backlog_followsClaimsAndReleases", testBacklogFollows},
	{"QueuedCount_untilAck", testQueuedCount},
	{"ClaimTenants_reclaimsDeadPump", testClaimTenantsReclaims},
	{"EnqueueFront_aheadInEveryOrder", testEnqueueFront},
}

var tenantQuotaTests = []contractTest{
	{"ReserveForTenant_tenantLimit", testReserveForTenantLimit},
	{"ReserveForTenant_concurrentNeverAbove", testReserveForTenantConcurrent},
	{"ReleaseReservation_dropsTenantHold", testReleaseDropsTenantHold},
	{"RefreshReservations_keepsTenantHold", testRefreshKeepsTenantHold},
	{"TakeToken_bucket", testTakeToken},
}

func backlog(t *testing.T, e *env, limit int) string {
	t.Helper()
	b, err := e.st.Backlog(e.ctx, limit)
	noErr(t, err)
	return fmt.Sprint(b)
}

func enqueueFor(t *testing.T, e *env, tenant string, runIDs ...string) {
	t.Helper()
	for _, id := range runIDs {
		noErr(t, e.st.EnqueueTenant(e.ctx, tenant, id))
		e.clock.Advance(time.Millisecond)
	}
}

func testEnqueueFilesUnderTenant(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	enqueue(t, e, "r1", "ghost") // ghost has no run: tenant ""
	if got, want := backlog(t, e, 0), "[{ 1} {t1 1}]"; got != want {
		t.Fatalf("Backlog = %s, want %s", got, want)
	}
}

func testClaimTenantsFIFO(t *testing.T, e *env) {
	enqueueFor(t, e, "a", "a1", "a2", "a3")
	enqueueFor(t, e, "b", "b1", "b2")
	enqueueFor(t, e, "a", "a4")
	got, err := e.st.ClaimTenants(e.ctx, "pump1", []store.TenantClaim{{TenantID: "b", Max: 1}, {TenantID: "a", Max: 2}, {TenantID: "c", Max: 5}}, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed", claimIDs(got), []string{"b1", "a1", "a2"})
	depth(t, e, 3, 3)
	// The global FIFO claim sees the same items.
	got, err = e.st.Claim(e.ctx, "pump1", 10, time.Minute)
	noErr(t, err)
	equalIDs(t, "global claim", claimIDs(got), []string{"a3", "b2", "a4"})
	if got := backlog(t, e, 0); got != "[]" {
		t.Fatalf("Backlog = %s, want none", got)
	}
}

func testBacklogFollows(t *testing.T, e *env) {
	enqueueFor(t, e, "a", "a1", "a2", "a3")
	enqueueFor(t, e, "b", "b1")
	if got, want := backlog(t, e, 0), "[{a 3} {b 1}]"; got != want {
		t.Fatalf("Backlog = %s, want %s", got, want)
	}
	if got, want := backlog(t, e, 2), "[{a 2} {b 1}]"; got != want {
		t.Fatalf("Backlog(limit 2) = %s, want %s", got, want)
	}
	got, err := e.st.ClaimTenants(e.ctx, "pump1", []store.TenantClaim{{TenantID: "b", Max: 1}, {TenantID: "a", Max: 1}}, time.Minute)
	noErr(t, err)
	if got, want := backlog(t, e, 0), "[{a 2}]"; got != want {
		t.Fatalf("Backlog after claims = %s, want %s", got, want)
	}
	noErr(t, e.st.Release(e.ctx, got[0]))
	if got, want := backlog(t, e, 0), "[{a 2} {b 1}]"; got != want {
		t.Fatalf("Backlog after release = %s, want %s", got, want)
	}
	// Released back to its place in its tenant's queue: a run that waited keeps its turn.
	noErr(t, e.st.Release(e.ctx, got[1]))
	again, err := e.st.ClaimTenants(e.ctx, "pump1", []store.TenantClaim{{TenantID: "a", Max: 3}}, time.Minute)
	noErr(t, err)
	equalIDs(t, "after release", claimIDs(again), []string{"a1", "a2", "a3"})
}

func testQueuedCount(t *testing.T, e *env) {
	count := func(want int) {
		t.Helper()
		n, err := e.st.QueuedCount(e.ctx, "a")
		noErr(t, err)
		if n != want {
			t.Fatalf("QueuedCount = %d, want %d", n, want)
		}
	}
	count(0)
	enqueueFor(t, e, "a", "a1", "a2")
	enqueueFor(t, e, "a", "a1") // already queued: no change
	count(2)
	got, err := e.st.ClaimTenants(e.ctx, "pump1", []store.TenantClaim{{TenantID: "a", Max: 2}}, time.Minute)
	noErr(t, err)
	count(2) // claimed items are still queued
	noErr(t, e.st.Ack(e.ctx, got[0]))
	count(1)
	noErr(t, e.st.Release(e.ctx, got[1]))
	count(1)
}

func testClaimTenantsReclaims(t *testing.T, e *env) {
	enqueueFor(t, e, "a", "a1")
	_, err := e.st.ClaimTenants(e.ctx, "dead", []store.TenantClaim{{TenantID: "a", Max: 1}}, time.Second)
	noErr(t, err)
	e.clock.Advance(2 * time.Second)
	got, err := e.st.ClaimTenants(e.ctx, "pump2", []store.TenantClaim{{TenantID: "a", Max: 1}}, time.Second)
	noErr(t, err)
	equalIDs(t, "reclaimed", claimIDs(got), []string{"a1"})
}

func holds(t *testing.T, e *env, id string) int {
	t.Helper()
	n, err := e.st.ReservationCount(e.ctx, id)
	noErr(t, err)
	return n
}

func testReserveForTenantLimit(t *testing.T, e *env) {
	th := store.TenantHolds("t1")
	ok, full, err := e.st.ReserveForTenant(e.ctx, "i1", "r1", 5, "t1", 2, time.Minute)
	noErr(t, err)
	ok2, _, err := e.st.ReserveForTenant(e.ctx, "i2", "r2", 5, "t1", 2, time.Minute)
	noErr(t, err)
	if !ok || full || !ok2 {
		t.Fatalf("first two = %v %v %v, want held", ok, full, ok2)
	}
	ok, full, err = e.st.ReserveForTenant(e.ctx, "i1", "r3", 5, "t1", 2, time.Minute)
	noErr(t, err)
	if ok || !full {
		t.Fatalf("third = ok %v tenantFull %v, want refused by the tenant", ok, full)
	}
	if holds(t, e, "i1") != 1 || holds(t, e, th) != 2 {
		t.Fatalf("holds i1 %d tenant %d, want 1 and 2 (a refusal holds nothing)", holds(t, e, "i1"), holds(t, e, th))
	}
	// The instance limit refuses without taking a tenant slot; no tenant limit means none.
	ok, full, err = e.st.ReserveForTenant(e.ctx, "i1", "r4", 1, "t2", 0, time.Minute)
	noErr(t, err)
	if ok || full || holds(t, e, store.TenantHolds("t2")) != 0 {
		t.Fatalf("instance full = ok %v tenantFull %v", ok, full)
	}
	// Reserving again refreshes; expired holds free their slots.
	ok, _, err = e.st.ReserveForTenant(e.ctx, "i1", "r1", 5, "t1", 2, time.Minute)
	noErr(t, err)
	e.clock.Advance(2 * time.Minute)
	ok2, _, err = e.st.ReserveForTenant(e.ctx, "i1", "r3", 5, "t1", 2, time.Minute)
	noErr(t, err)
	if !ok || !ok2 {
		t.Fatalf("refresh %v, after expiry %v, want both held", ok, ok2)
	}
}

func testReserveForTenantConcurrent(t *testing.T, e *env) {
	const tries, limit = 40, 7
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := 0
	errs := make(chan error, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, _, err := e.st.ReserveForTenant(e.ctx, fmt.Sprintf("i%d", i%5), fmt.Sprintf("r%d", i), 100, "t1", limit, time.Minute)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				mu.Lock()
				held++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		noErr(t, err)
	}
	if held != limit || holds(t, e, store.TenantHolds("t1")) != limit {
		t.Fatalf("held %d (count %d), want exactly %d", held, holds(t, e, store.TenantHolds("t1")), limit)
	}
}

func testReleaseDropsTenantHold(t *testing.T, e *env) {
	_, _, err := e.st.ReserveForTenant(e.ctx, "i1", "r1", 5, "t1", 1, time.Minute)
	noErr(t, err)
	// Releasing another instance's hold of the run (a late cleanup) keeps the tenant hold.
	noErr(t, e.st.ReleaseReservation(e.ctx, "i9", "r1"))
	if holds(t, e, store.TenantHolds("t1")) != 1 {
		t.Fatalf("tenant hold dropped by another instance's release")
	}
	noErr(t, e.st.ReleaseReservation(e.ctx, "i1", "r1"))
	if holds(t, e, "i1") != 0 || holds(t, e, store.TenantHolds("t1")) != 0 {
		t.Fatalf("holds after release: i1 %d tenant %d", holds(t, e, "i1"), holds(t, e, store.TenantHolds("t1")))
	}
	ok, _, err := e.st.ReserveForTenant(e.ctx, "i2", "r2", 5, "t1", 1, time.Minute)
	noErr(t, err)
	if !ok {
		t.Fatalf("the released tenant slot is not free")
	}
}

func testRefreshKeepsTenantHold(t *testing.T, e *env) {
	_, _, err := e.st.ReserveForTenant(e.ctx, "i1", "r1", 5, "t1", 1, time.Minute)
	noErr(t, err)
	e.clock.Advance(50 * time.Second)
	noErr(t, e.st.RefreshReservations(e.ctx, "i1", []string{"r1"}, time.Minute))
	e.clock.Advance(50 * time.Second)
	if holds(t, e, "i1") != 1 || holds(t, e, store.TenantHolds("t1")) != 1 {
		t.Fatalf("refreshed holds lapsed: i1 %d tenant %d", holds(t, e, "i1"), holds(t, e, store.TenantHolds("t1")))
	}
	e.clock.Advance(time.Minute)
	if holds(t, e, store.TenantHolds("t1")) != 0 {
		t.Fatalf("tenant hold outlived its instance hold")
	}
}

func testTakeToken(t *testing.T, e *env) {
	take := func(want bool) {
		t.Helper()
		ok, err := e.st.TakeToken(e.ctx, "t1", 2, 3)
		noErr(t, err)
		if ok != want {
			t.Fatalf("TakeToken = %v, want %v", ok, want)
		}
	}
	take(true) // a new bucket is full: burst 3
	take(true)
	take(true)
	take(false)
	e.clock.Advance(250 * time.Millisecond) // half a token at 2/s
	take(false)
	e.clock.Advance(250 * time.Millisecond)
	take(true)
	take(false)
	e.clock.Advance(time.Hour) // refills up to burst only
	take(true)
	take(true)
	take(true)
	take(false)
	if ok, err := e.st.TakeToken(e.ctx, "t2", 0, 0); err != nil || !ok {
		t.Fatalf("no rate = %v, %v; want always a token", ok, err)
	}
}

// testEnqueueFront: a run put at the front (recovered from a lost instance) is claimed before
// the runs queued ahead of it, in the shared order and in its tenant's; a later front goes
// ahead of an earlier one; released, it goes back to its front place; and putting a pending or
// claimed run at the front changes nothing.
func testEnqueueFront(t *testing.T, e *env) {
	for _, id := range []string{"a1", "a2", "x", "y"} {
		_, _, err := e.st.CreateRun(e.ctx, run(id, "a"))
		noErr(t, err)
	}
	enqueue(t, e, "a1", "a2")
	noErr(t, e.st.EnqueueFront(e.ctx, "x"))
	noErr(t, e.st.EnqueueFront(e.ctx, "y"))
	noErr(t, e.st.EnqueueFront(e.ctx, "a2")) // pending already: stays in its place
	depth(t, e, 4, 0)
	got, err := e.st.ClaimTenants(e.ctx, "pump1", []store.TenantClaim{{TenantID: "a", Max: 1}}, time.Minute)
	noErr(t, err)
	equalIDs(t, "tenant claim", claimIDs(got), []string{"y"})
	noErr(t, e.st.EnqueueFront(e.ctx, "y")) // claimed: no-op
	enqueue(t, e, "a1")                     // pending: no-op
	noErr(t, e.st.Release(e.ctx, got[0]))
	all, err := e.st.Claim(e.ctx, "pump1", 10, time.Minute)
	noErr(t, err)
	equalIDs(t, "shared claim", claimIDs(all), []string{"y", "x", "a1", "a2"})
}
