package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var recoveryTests = []contractTest{
	{"RequeueRuns_fencesAndRequeues", testRequeueRunsMoves},
	{"RequeueRuns_eachRunOnItsOwn", testRequeueRunsMixed},
	{"RequeueRuns_repeatedMovesOnce", testRequeueRunsRepeated},
}

// recovery returns e's store as a store.Recovery, or skips the test.
func recovery(t *testing.T, e *env) store.Recovery {
	t.Helper()
	r, ok := e.st.(store.Recovery)
	if !ok {
		t.Skip("backend has no store.Recovery")
	}
	return r
}

// runOn creates run id running on instance inst with execution x<id> there, holding a slot.
func runOn(t *testing.T, e *env, id, inst string) {
	t.Helper()
	r := run(id, "t1")
	r.Status, r.AssignedRuntimeInstanceId, r.ExecutionId = messages.RunRunning, inst, "x"+id
	_, _, err := e.st.CreateRun(e.ctx, r)
	noErr(t, err)
	createExecution(t, e, execution("x"+id, id, inst))
	equal(t, "reserved "+id, reserve(t, e, inst, id, 10, time.Minute), true)
}

// requeueOf is the Requeue of run id from instance from, as recovery builds it: only a run
// still assigned to from and running moves, marked as a recovery.
func requeueOf(id, from string) store.Requeue {
	return store.Requeue{RunID: id, ExecutionID: "x" + id, From: from, Owner: "recovery:a",
		Take: func(r *messages.SharedRun) bool {
			if r.AssignedRuntimeInstanceId != from || r.Status != messages.RunRunning {
				return false
			}
			r.Recovery = true
			return true
		},
		Entry: func(epoch int64) *messages.LedgerEntry {
			return &messages.LedgerEntry{Kind: messages.KindRecovery, Reason: "runtime-instance-lost", Epoch: epoch}
		}}
}

func requeueRuns(t *testing.T, e *env, batch ...store.Requeue) []store.RequeueResult {
	t.Helper()
	res, err := recovery(t, e).RequeueRuns(e.ctx, batch)
	noErr(t, err)
	equal(t, "results", len(res), len(batch))
	for _, r := range res {
		noErr(t, r.Err)
	}
	return res
}

// testRequeueRunsMoves: the execution is fenced, the run queued with Take's change and the
// entry (at the fence's epoch), its hold released and its queue item pending ahead of the
// items queued before.
func testRequeueRunsMoves(t *testing.T, e *env) {
	recovery(t, e)
	runOn(t, e, "r1", "lost")
	enqueue(t, e, "waiting") // queued before the recovery: r1 goes ahead of it (EnqueueFront)
	res := requeueRuns(t, e, requeueOf("r1", "lost"))
	equal(t, "fenced", res[0].Fenced, true)
	equal(t, "moved", res[0].Moved, true)
	equal(t, "epoch", res[0].Epoch, int64(2))
	x, _, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	equal(t, "stored epoch", x.GetEpoch(), int64(2))
	equal(t, "owner", x.GetOwner(), "recovery:a")
	equal(t, "instance cleared", x.GetRuntimeInstanceId(), "")
	r, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status", r.GetStatus(), messages.RunQueued)
	equal(t, "take's change", r.GetRecovery(), true)
	led := readLedger(t, e, "r1")
	equal(t, "ledger", len(led), 1)
	equal(t, "entry kind", led[0].GetKind(), messages.KindRecovery)
	equal(t, "entry epoch", led[0].GetEpoch(), int64(2))
	equal(t, "entry run", led[0].GetSharedRunId(), "r1")
	equal(t, "hold released", reservationHeld(t, e, "lost", "r1"), false)
	claims, err := e.st.Claim(e.ctx, "pump", 10, time.Minute)
	noErr(t, err)
	equalIDs(t, "pending", claimIDs(claims), []string{"r1", "waiting"})
}

// testRequeueRunsMixed: in one batch, each run on its own: a run whose execution a newer
// activation took is left alone; a run Take declines (queued already) is neither fenced nor
// moved; a run without execution moves at epoch 0; a missing run is no error; and a movable
// run moves.
func testRequeueRunsMixed(t *testing.T, e *env) {
	recovery(t, e)
	runOn(t, e, "taken", "lost")
	_, err := e.st.AcquireExecution(e.ctx, "xtaken", "node2", "i2")
	noErr(t, err)
	runOn(t, e, "declined", "lost")
	_, err = e.st.UpdateRun(e.ctx, "declined", func(r *messages.SharedRun) error { r.Status = messages.RunQueued; return nil })
	noErr(t, err)
	bare := run("bare", "t1")
	bare.Status, bare.AssignedRuntimeInstanceId = messages.RunRunning, "lost"
	_, _, err = e.st.CreateRun(e.ctx, bare)
	noErr(t, err)
	noExec := requeueOf("bare", "lost")
	noExec.ExecutionID = ""
	runOn(t, e, "ok", "lost")
	res := requeueRuns(t, e, requeueOf("taken", "lost"), requeueOf("declined", "lost"), noExec, requeueOf("missing", "lost"),
		requeueOf("ok", "lost"))
	equal(t, "taken: not fenced", res[0].Fenced, false)
	equal(t, "taken: not moved", res[0].Moved, false)
	r, err := e.st.GetRun(e.ctx, "taken")
	noErr(t, err)
	equal(t, "taken: still running", r.GetStatus(), messages.RunRunning)
	equal(t, "taken: no entry", len(readLedger(t, e, "taken")), 0)
	equal(t, "declined: not fenced", res[1].Fenced, false)
	equal(t, "declined: not moved", res[1].Moved, false)
	x, _, err := e.st.GetExecution(e.ctx, "xdeclined")
	noErr(t, err)
	equal(t, "declined: epoch untouched", x.GetEpoch(), int64(1))
	equal(t, "declined: no entry", len(readLedger(t, e, "declined")), 0)
	equal(t, "declined: hold kept", reservationHeld(t, e, "lost", "declined"), true)
	equal(t, "no execution: moved", res[2].Moved, true)
	equal(t, "no execution: epoch 0", res[2].Epoch, int64(0))
	equal(t, "missing: not moved", res[3].Moved, false)
	equal(t, "ok: moved", res[4].Moved, true)
	claims, err := e.st.Claim(e.ctx, "pump", 10, time.Minute)
	noErr(t, err)
	pending := claimIDs(claims)
	slices.Sort(pending) // requeued by one batch at one instant: their queue order is not the batch's
	equalIDs(t, "pending", pending, []string{"bare", "ok"})
}

// testRequeueRunsRepeated: a batch repeated (an overlapping recovery) moves each run once.
func testRequeueRunsRepeated(t *testing.T, e *env) {
	recovery(t, e)
	runOn(t, e, "r1", "lost")
	requeueRuns(t, e, requeueOf("r1", "lost"))
	res := requeueRuns(t, e, requeueOf("r1", "lost"))
	equal(t, "second: not moved", res[0].Moved, false)
	equal(t, "ledger", len(readLedger(t, e, "r1")), 1)
	pending, claimed, err := e.st.QueueDepth(e.ctx)
	noErr(t, err)
	equal(t, "pending once", pending, int64(1))
	equal(t, "claimed", claimed, int64(0))
}
