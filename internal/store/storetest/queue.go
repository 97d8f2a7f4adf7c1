package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
)

var queueTests = []contractTest{
	{"Claim_fifo", testClaimFIFO},
	{"Enqueue_idempotent", testEnqueueIdempotent},
	{"Ack_removes", testAckRemoves},
	{"Claim_deadPumpComesBack", testClaimDeadPump},
	{"Release_keepsPlace", testReleaseKeepsPlace},
	{"Claim_concurrentExclusive", testClaimConcurrent},
	{"ReleaseClaimsOf_deadPumpAtOnce", testReleaseClaimsOf},
}

func claimIDs(cs []store.Claim) []string {
	return ids(cs, func(c store.Claim) string { return c.RunID })
}

func enqueue(t *testing.T, e *env, runIDs ...string) {
	t.Helper()
	for _, id := range runIDs {
		noErr(t, e.st.Enqueue(e.ctx, id))
		e.clock.Advance(time.Millisecond)
	}
}

func depth(t *testing.T, e *env, wantPending, wantClaimed int64) {
	t.Helper()
	p, c, err := e.st.QueueDepth(e.ctx)
	noErr(t, err)
	if p != wantPending || c != wantClaimed {
		t.Fatalf("QueueDepth = (%d, %d), want (%d, %d)", p, c, wantPending, wantClaimed)
	}
}

func testClaimFIFO(t *testing.T, e *env) {
	depth(t, e, 0, 0)
	enqueue(t, e, "c", "a", "b", "d")
	depth(t, e, 4, 0)
	got, err := e.st.Claim(e.ctx, "pump1", 3, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed", claimIDs(got), []string{"c", "a", "b"})
	for _, c := range got {
		if c.Token == "" {
			t.Fatalf("claim %s has no token", c.RunID)
		}
	}
	depth(t, e, 1, 3)
	got, err = e.st.Claim(e.ctx, "pump1", 3, time.Minute)
	noErr(t, err)
	equalIDs(t, "second claim", claimIDs(got), []string{"d"})
	got, err = e.st.Claim(e.ctx, "pump1", 3, time.Minute)
	noErr(t, err)
	equalIDs(t, "empty claim", claimIDs(got), []string{})
}

func testEnqueueIdempotent(t *testing.T, e *env) {
	enqueue(t, e, "a", "b", "a")
	depth(t, e, 2, 0)
	got, err := e.st.Claim(e.ctx, "pump1", 1, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed", claimIDs(got), []string{"a"})
	enqueue(t, e, "a") // claimed: no-op
	depth(t, e, 1, 1)
	got, err = e.st.Claim(e.ctx, "pump1", 10, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed", claimIDs(got), []string{"b"})
}

func testAckRemoves(t *testing.T, e *env) {
	enqueue(t, e, "a")
	got, err := e.st.Claim(e.ctx, "pump1", 1, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed", claimIDs(got), []string{"a"})
	stale := store.Claim{RunID: "a", Token: got[0].Token + "x"}
	isErr(t, e.st.Ack(e.ctx, stale), store.ErrClaimLost)
	noErr(t, e.st.Ack(e.ctx, got[0]))
	depth(t, e, 0, 0)
	isErr(t, e.st.Ack(e.ctx, got[0]), store.ErrClaimLost)
	isErr(t, e.st.Ack(e.ctx, store.Claim{RunID: "never", Token: "t"}), store.ErrClaimLost)
	// An acked run may be enqueued again.
	enqueue(t, e, "a")
	depth(t, e, 1, 0)
}

func testClaimDeadPump(t *testing.T, e *env) {
	enqueue(t, e, "a", "b")
	dead, err := e.st.Claim(e.ctx, "dead", 2, 10*time.Second)
	noErr(t, err)
	equalIDs(t, "dead pump claim", claimIDs(dead), []string{"a", "b"})

	e.clock.Advance(5 * time.Second)
	got, err := e.st.Claim(e.ctx, "live", 10, 10*time.Second)
	noErr(t, err)
	equalIDs(t, "claim before visibility", claimIDs(got), []string{})

	enqueue(t, e, "c") // queued after them: the expired claims come back ahead of it
	e.clock.Advance(6 * time.Second)
	got, err = e.st.Claim(e.ctx, "live", 2, 10*time.Second)
	noErr(t, err)
	equalIDs(t, "claim after visibility", claimIDs(got), []string{"a", "b"})
	for i, c := range got {
		if c.Token == dead[0].Token || c.Token == dead[1].Token {
			t.Fatalf("claim %d reused a dead token", i)
		}
	}
	for _, c := range dead {
		isErr(t, e.st.Ack(e.ctx, c), store.ErrClaimLost)
	}
	for _, c := range got {
		noErr(t, e.st.Ack(e.ctx, c))
	}
	depth(t, e, 1, 0)
}

// testReleaseKeepsPlace: a released item is pending again in the place it was claimed from,
// ahead of the items queued after it (a run that waited for a slot keeps its turn), with a new
// token on its next claim.
func testReleaseKeepsPlace(t *testing.T, e *env) {
	enqueue(t, e, "a", "b")
	got, err := e.st.Claim(e.ctx, "pump1", 1, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed", claimIDs(got), []string{"a"})
	enqueue(t, e, "c")
	noErr(t, e.st.Release(e.ctx, got[0]))
	depth(t, e, 3, 0)
	isErr(t, e.st.Ack(e.ctx, got[0]), store.ErrClaimLost)
	again, err := e.st.Claim(e.ctx, "pump1", 3, time.Minute)
	noErr(t, err)
	equalIDs(t, "after release", claimIDs(again), []string{"a", "b", "c"})
	if again[0].Token == got[0].Token {
		t.Fatal("reclaimed item kept its old token")
	}
	// Released again, each goes back to its place whatever the order of the releases.
	noErr(t, e.st.Release(e.ctx, again[2]))
	noErr(t, e.st.Release(e.ctx, again[0]))
	noErr(t, e.st.Release(e.ctx, again[1]))
	third, err := e.st.Claim(e.ctx, "pump1", 3, time.Minute)
	noErr(t, err)
	equalIDs(t, "after releases in another order", claimIDs(third), []string{"a", "b", "c"})
}

func testReleaseClaimsOf(t *testing.T, e *env) {
	enqueue(t, e, "a", "b", "c", "d")
	dead, err := e.st.Claim(e.ctx, "pump-n1", 2, time.Minute)
	noErr(t, err)
	equalIDs(t, "dead pump claim", claimIDs(dead), []string{"a", "b"})
	live, err := e.st.Claim(e.ctx, "pump-n10", 1, time.Minute) // a prefix of it is not it
	noErr(t, err)
	equalIDs(t, "live pump claim", claimIDs(live), []string{"c"})
	n, err := e.st.ReleaseClaimsOf(e.ctx, "pump-n1")
	noErr(t, err)
	equal(t, "released", n, 2)
	depth(t, e, 3, 1)
	for _, c := range dead {
		isErr(t, e.st.Ack(e.ctx, c), store.ErrClaimLost)
	}
	// Before any visibility passed, another pump gets them, in their places (before d).
	got, err := e.st.Claim(e.ctx, "pump-n2", 10, time.Minute)
	noErr(t, err)
	equalIDs(t, "claimed by a live pump", claimIDs(got), []string{"a", "b", "d"})
	n, err = e.st.ReleaseClaimsOf(e.ctx, "pump-n1")
	noErr(t, err)
	equal(t, "nothing left", n, 0)
	noErr(t, e.st.Ack(e.ctx, live[0]))
}

func testClaimConcurrent(t *testing.T, e *env) {
	const items, pumps = 40, 8
	for i := range items {
		noErr(t, e.st.Enqueue(e.ctx, fmt.Sprintf("r%02d", i)))
	}
	var mu sync.Mutex // guards seen
	seen := map[string]int{}
	runConcurrently(t, pumps, func(p int) error {
		for {
			cs, err := e.st.Claim(e.ctx, fmt.Sprintf("pump%d", p), 3, time.Minute)
			if err != nil {
				return err
			}
			if len(cs) == 0 {
				return nil
			}
			mu.Lock()
			for _, c := range cs {
				seen[c.RunID]++
			}
			mu.Unlock()
		}
	})
	equal(t, "distinct claimed", len(seen), items)
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
	depth(t, e, 0, items)
}
