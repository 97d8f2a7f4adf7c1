package storetest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var assignTests = []contractTest{
	{"ClaimRuns_returnsRuns", testClaimRunsReturnsRuns},
	{"Assign_writesAll", testAssignWritesAll},
	{"Assign_overCommitRefused", testAssignOverCommitRefused},
	{"Assign_concurrentWithinCapacity", testAssignConcurrent},
	{"Assign_notTwice", testAssignNotTwice},
	{"Assign_changedRun", testAssignChangedRun},
	{"Assign_createsRun", testAssignCreatesRun},
	{"Assign_instanceChanged", testAssignInstanceChanged},
	{"Assign_loadChangeKeepsVersion", testAssignLoadChangeKeepsVersion},
	{"Assign_keepsTenantQueues", testAssignKeepsTenantQueues},
	{"Assign_listedByActiveStatus", testAssignListedByActiveStatus},
	{"AssignAndStart", testAssignAndStart},
}

// assigner returns e's store as a store.Assigner, or skips the test.
func assigner(t *testing.T, e *env) store.Assigner {
	t.Helper()
	a, ok := e.st.(store.Assigner)
	if !ok {
		t.Skip("backend has no store.Assigner")
	}
	return a
}

// queuedRun creates and enqueues a queued run.
func queuedRun(t *testing.T, e *env, id string) *messages.SharedRun {
	t.Helper()
	r, _, err := e.st.CreateRun(e.ctx, run(id, "t1"))
	noErr(t, err)
	noErr(t, e.st.Enqueue(e.ctx, id))
	return r
}

// assignment is the dispatch of r to inst (limit slots) at version ver.
func assignment(r *messages.SharedRun, inst string, limit int, ver int64) store.Assignment {
	upd := &messages.SharedRun{SharedRunId: r.SharedRunId, TenantId: r.TenantId, Pipeline: r.Pipeline, CreatedAt: r.CreatedAt, IdempotencyKey: r.IdempotencyKey,
		Status: messages.RunDispatched, AssignedRuntimeInstanceId: inst, Attempts: r.Attempts + 1}
	return store.Assignment{Run: upd, Version: ver, InstanceID: inst, Limit: limit, TTL: time.Minute,
		Ledger: []*messages.LedgerEntry{{Kind: messages.KindAdmission, Reason: "assign"}, {Kind: messages.KindReservation, Reason: "reserved"}}}
}

func testClaimRunsReturnsRuns(t *testing.T, e *env) {
	a := assigner(t, e)
	queuedRun(t, e, "r1")
	noErr(t, e.st.Enqueue(e.ctx, "gone"))
	got, err := a.ClaimRuns(e.ctx, "pump1", 10, time.Minute)
	noErr(t, err)
	equal(t, "claimed", len(got), 2)
	equal(t, "run", got[0].Run.GetSharedRunId(), "r1")
	equal(t, "version", got[0].Version, store.CreatedRunVersion)
	equal(t, "gone run", got[1].Run == nil, true)
	depth(t, e, 0, 2)
	_, ver, err := a.GetRunVersion(e.ctx, "r1")
	noErr(t, err)
	equal(t, "GetRunVersion", ver, store.CreatedRunVersion)
	_, err = e.st.UpdateRun(e.ctx, "r1", func(r *messages.SharedRun) error { r.FailureReason = "x"; return nil })
	noErr(t, err)
	_, ver, err = a.GetRunVersion(e.ctx, "r1")
	noErr(t, err)
	equal(t, "version after update", ver, store.CreatedRunVersion+1)
}

func testAssignWritesAll(t *testing.T, e *env) {
	a := assigner(t, e)
	r := queuedRun(t, e, "r1")
	cl, err := a.ClaimRuns(e.ctx, "pump1", 1, time.Minute)
	noErr(t, err)
	res, held, err := a.Assign(e.ctx, assignment(r, "i1", 2, cl[0].Version))
	noErr(t, err)
	equal(t, "result", res, store.Assigned)
	equal(t, "held", held, 1)
	got, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status", got.Status, messages.RunDispatched)
	equal(t, "instance", got.AssignedRuntimeInstanceId, "i1")
	n, err := e.st.ReservationCount(e.ctx, "i1")
	noErr(t, err)
	equal(t, "reservations", n, 1)
	depth(t, e, 0, 0)
	isErr(t, e.st.Ack(e.ctx, cl[0].Claim), store.ErrClaimLost)
	led, err := e.st.ReadLedger(e.ctx, "r1", 0, 0)
	noErr(t, err)
	equal(t, "ledger entries", len(led), 2)
	equal(t, "ledger seq", led[1].Seq, int64(2))
}

func testAssignOverCommitRefused(t *testing.T, e *env) {
	a := assigner(t, e)
	r1, r2 := queuedRun(t, e, "r1"), queuedRun(t, e, "r2")
	res, _, err := a.Assign(e.ctx, assignment(r1, "i1", 1, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "first", res, store.Assigned)
	res, held, err := a.Assign(e.ctx, assignment(r2, "i1", 1, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "second", res, store.InstanceFull)
	equal(t, "held", held, 1)
	got, err := e.st.GetRun(e.ctx, "r2")
	noErr(t, err)
	equal(t, "refused run status", got.Status, messages.RunQueued)
	led, err := e.st.ReadLedger(e.ctx, "r2", 0, 0)
	noErr(t, err)
	equal(t, "refused run ledger", len(led), 0)
	depth(t, e, 1, 0)
	// An expired hold frees its slot.
	e.clock.Advance(2 * time.Minute)
	res, _, err = a.Assign(e.ctx, assignment(r2, "i1", 1, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "after expiry", res, store.Assigned)
}

func testAssignConcurrent(t *testing.T, e *env) {
	a := assigner(t, e)
	const limit, callers = 5, 40
	runs := make([]*messages.SharedRun, callers)
	for i := range runs {
		runs[i] = queuedRun(t, e, fmt.Sprintf("r%02d", i))
	}
	var ok atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, held, err := a.Assign(e.ctx, assignment(r, "i1", limit, store.CreatedRunVersion))
			if err != nil {
				errs <- err
				return
			}
			if held > limit {
				errs <- fmt.Errorf("held %d > limit %d", held, limit)
			}
			if res == store.Assigned {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	equal(t, "assigned", ok.Load(), int64(limit))
	n, err := e.st.ReservationCount(e.ctx, "i1")
	noErr(t, err)
	equal(t, "reservations", n, limit)
}

func testAssignNotTwice(t *testing.T, e *env) {
	a := assigner(t, e)
	r := queuedRun(t, e, "r1")
	// Two dispatchers (say a pump with a claim and a direct handoff) decide on the same read.
	var wg sync.WaitGroup
	results := make([]store.AssignResult, 2)
	errs := make([]error, 2)
	for i, inst := range []string{"i1", "i2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, errs[i] = a.Assign(e.ctx, assignment(r, inst, 10, store.CreatedRunVersion))
		}()
	}
	wg.Wait()
	noErr(t, errs[0])
	noErr(t, errs[1])
	won := 0
	for _, res := range results {
		if res == store.Assigned {
			won++
		} else {
			equal(t, "loser", res, store.RunChanged)
		}
	}
	equal(t, "assigned", won, 1)
	total := 0
	for _, inst := range []string{"i1", "i2"} {
		n, err := e.st.ReservationCount(e.ctx, inst)
		noErr(t, err)
		total += n
	}
	equal(t, "holds", total, 1)
	// A later decision taken on the same (now stale) read is refused too.
	res, _, err := a.Assign(e.ctx, assignment(r, "i3", 10, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "stale read", res, store.RunChanged)
}

func testAssignChangedRun(t *testing.T, e *env) {
	a := assigner(t, e)
	r := queuedRun(t, e, "r1")
	_, err := e.st.UpdateRun(e.ctx, "r1", func(r *messages.SharedRun) error { r.Status = messages.RunCancelled; return nil })
	noErr(t, err)
	res, _, err := a.Assign(e.ctx, assignment(r, "i1", 10, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "result", res, store.RunChanged)
	n, err := e.st.ReservationCount(e.ctx, "i1")
	noErr(t, err)
	equal(t, "reservations", n, 0)
	res, _, err = a.Assign(e.ctx, assignment(&messages.SharedRun{SharedRunId: "missing"}, "i1", 10, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "missing run", res, store.RunChanged)
}

func testAssignCreatesRun(t *testing.T, e *env) {
	a := assigner(t, e)
	res, _, err := a.Assign(e.ctx, assignment(run("r1", "t1"), "i1", 1, store.NewRunVersion))
	noErr(t, err)
	equal(t, "result", res, store.Assigned)
	got, ver, err := a.GetRunVersion(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status", got.Status, messages.RunDispatched)
	equal(t, "version", ver, store.CreatedRunVersion)
	equal(t, "CreatedAt", got.CreatedAt, epoch.UnixNano())
	list, err := e.st.ListRuns(e.ctx, store.RunFilter{TenantID: "t1"})
	noErr(t, err)
	equal(t, "listed", len(list), 1)
	led, err := e.st.ReadLedger(e.ctx, "r1", 0, 0)
	noErr(t, err)
	equal(t, "ledger entries", len(led), 2)
	// The instance is full: the new run is not created at all.
	res, _, err = a.Assign(e.ctx, assignment(run("r2", "t1"), "i1", 1, store.NewRunVersion))
	noErr(t, err)
	equal(t, "full", res, store.InstanceFull)
	_, err = e.st.GetRun(e.ctx, "r2")
	isErr(t, err, store.ErrNotFound)
	// A taken id is not overwritten.
	res, _, err = a.Assign(e.ctx, assignment(run("r1", "t1"), "i2", 1, store.NewRunVersion))
	noErr(t, err)
	equal(t, "taken id", res, store.RunChanged)
	withKey := run("r3", "t1")
	withKey.IdempotencyKey = "k"
	if _, _, err := a.Assign(e.ctx, assignment(withKey, "i2", 1, store.NewRunVersion)); err == nil {
		t.Fatal("a run with an idempotency key was created by Assign")
	}
}

func testAssignInstanceChanged(t *testing.T, e *env) {
	a := assigner(t, e)
	noErr(t, e.st.PutInstance(e.ctx, &messages.CapacityDescriptor{RuntimeInstanceId: "i1", CanAcceptRun: true}, time.Minute))
	insts, vers, err := a.ListInstanceVersions(e.ctx)
	noErr(t, err)
	equal(t, "listed", len(insts), 1)
	equal(t, "versions", len(vers), 1)
	seen := vers[0]
	// The instance publishes again (paused, say): a decision on the old descriptor is refused.
	e.clock.Advance(time.Millisecond)
	noErr(t, e.st.PutInstance(e.ctx, &messages.CapacityDescriptor{RuntimeInstanceId: "i1", IsQueuePaused: true}, time.Minute))
	r := queuedRun(t, e, "r1")
	as := assignment(r, "i1", 10, store.CreatedRunVersion)
	as.InstanceVersion = seen
	res, _, err := a.Assign(e.ctx, as)
	noErr(t, err)
	equal(t, "stale descriptor", res, store.InstanceChanged)
	got, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status", got.Status, messages.RunQueued)
	_, vers, err = a.ListInstanceVersions(e.ctx)
	noErr(t, err)
	as.InstanceVersion = vers[0]
	res, _, err = a.Assign(e.ctx, as)
	noErr(t, err)
	equal(t, "current descriptor", res, store.Assigned)
	// An expired entry is no longer current.
	e.clock.Advance(2 * time.Minute)
	as = assignment(queuedRun(t, e, "r2"), "i1", 10, store.CreatedRunVersion)
	as.InstanceVersion = vers[0]
	res, _, err = a.Assign(e.ctx, as)
	noErr(t, err)
	equal(t, "expired entry", res, store.InstanceChanged)
}

// testAssignLoadChangeKeepsVersion checks that a publication that changes only an instance's
// load (its run and worker counts, free slots, heartbeat) keeps its registry version, so a
// decision taken before it still holds, while a resize does not.
func testAssignLoadChangeKeepsVersion(t *testing.T, e *env) {
	a := assigner(t, e)
	d := &messages.CapacityDescriptor{RuntimeInstanceId: "i1", Status: messages.InstanceReady, CanAcceptRun: true,
		MaxConcurrentRuns: 10, AvailableRunSlots: 10, WorkerCount: 4, AvailableWorkerCount: 4, LastHeartbeatAt: 1}
	noErr(t, e.st.PutInstance(e.ctx, d, time.Minute))
	_, vers, err := a.ListInstanceVersions(e.ctx)
	noErr(t, err)
	equal(t, "listed", len(vers), 1)
	seen := vers[0]
	e.clock.Advance(time.Millisecond)
	busy := &messages.CapacityDescriptor{RuntimeInstanceId: "i1", Status: messages.InstanceReady, CanAcceptRun: false,
		MaxConcurrentRuns: 10, AvailableRunSlots: 0, RunningRunCount: 10, ActiveRunCount: 10, WorkerCount: 4,
		ActiveWorkerCount: 4, LastHeartbeatAt: 2}
	noErr(t, e.st.PutInstance(e.ctx, busy, time.Minute))
	_, vers, err = a.ListInstanceVersions(e.ctx)
	noErr(t, err)
	equal(t, "version after a load change", vers[0], seen)
	as := assignment(queuedRun(t, e, "r1"), "i1", 10, store.CreatedRunVersion)
	as.InstanceVersion = seen
	res, _, err := a.Assign(e.ctx, as)
	noErr(t, err)
	equal(t, "decision before a load change", res, store.Assigned)
	// A resize is a new shape: the old version is refused.
	e.clock.Advance(time.Millisecond)
	resized := &messages.CapacityDescriptor{RuntimeInstanceId: "i1", Status: messages.InstanceReady, CanAcceptRun: true,
		MaxConcurrentRuns: 5, AvailableRunSlots: 5, WorkerCount: 4, AvailableWorkerCount: 4, LastHeartbeatAt: 3}
	noErr(t, e.st.PutInstance(e.ctx, resized, time.Minute))
	as = assignment(queuedRun(t, e, "r2"), "i1", 10, store.CreatedRunVersion)
	as.InstanceVersion = seen
	res, _, err = a.Assign(e.ctx, as)
	noErr(t, err)
	equal(t, "decision before a resize", res, store.InstanceChanged)
}

// testAssignKeepsTenantQueues checks that ClaimRuns and Assign keep the per-tenant queues
// (store.TenantQueues) in step: a claimed run is no longer in its tenant's backlog, and an
// assigned one (claimed or still pending) no longer counts as queued.
func testAssignKeepsTenantQueues(t *testing.T, e *env) {
	a := assigner(t, e)
	tq, ok := e.st.(store.TenantQueues)
	if !ok {
		t.Skip("backend has no store.TenantQueues")
	}
	r1 := queuedRun(t, e, "r1")
	r2 := queuedRun(t, e, "r2")
	cl, err := a.ClaimRuns(e.ctx, "pump1", 1, time.Minute)
	noErr(t, err)
	equal(t, "claimed", len(cl), 1)
	bl, err := tq.Backlog(e.ctx, 0)
	noErr(t, err)
	equal(t, "backlog after claim", fmt.Sprint(bl), fmt.Sprint([]store.TenantBacklog{{TenantID: "t1", Pending: 1}}))
	res, _, err := a.Assign(e.ctx, assignment(r1, "i1", 4, cl[0].Version))
	noErr(t, err)
	equal(t, "claimed run assigned", res, store.Assigned)
	res, _, err = a.Assign(e.ctx, assignment(r2, "i1", 4, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "pending run assigned", res, store.Assigned)
	n, err := tq.QueuedCount(e.ctx, "t1")
	noErr(t, err)
	equal(t, "queued after assignments", n, 0)
	bl, err = tq.Backlog(e.ctx, 0)
	noErr(t, err)
	equal(t, "backlog after assignments", len(bl), 0)
	depth(t, e, 0, 0)
}

// testAssignListedByActiveStatus: a run Assign creates (a hand-off) or assigns is listed by its
// active status, which is how recovery finds the runs of a lost instance, and no longer once it
// ended.
func testAssignListedByActiveStatus(t *testing.T, e *env) {
	a := assigner(t, e)
	res, _, err := a.Assign(e.ctx, assignment(run("handed", "t1"), "i1", 10, store.NewRunVersion))
	noErr(t, err)
	equal(t, "hand-off", res, store.Assigned)
	res, _, err = a.Assign(e.ctx, assignment(queuedRun(t, e, "queued"), "i1", 10, store.CreatedRunVersion))
	noErr(t, err)
	equal(t, "assignment", res, store.Assigned)
	runID := func(r *messages.SharedRun) string { return r.GetSharedRunId() }
	got, err := e.st.ListRuns(e.ctx, store.RunFilter{Status: messages.RunDispatched})
	noErr(t, err)
	listed := ids(got, runID)
	slices.Sort(listed)
	equalIDs(t, "dispatched", listed, []string{"handed", "queued"})
	_, err = e.st.UpdateRun(e.ctx, "handed", func(r *messages.SharedRun) error { r.Status = messages.RunSucceeded; return nil })
	noErr(t, err)
	got, err = e.st.ListRuns(e.ctx, store.RunFilter{Status: messages.RunDispatched})
	noErr(t, err)
	equalIDs(t, "dispatched after one ended", ids(got, runID), []string{"queued"})
}

// testAssignAndStart: a store.StartingAssigner writes the assignment and the execution's start
// together, or neither.
func testAssignAndStart(t *testing.T, e *env) {
	a, ok := e.st.(store.StartingAssigner)
	if !ok {
		t.Skip("backend has no store.StartingAssigner")
	}
	start := func(runID, execID, inst string) store.ExecutionStart {
		return store.ExecutionStart{Execution: &messages.Execution{ExecutionId: execID, SharedRunId: runID, RuntimeInstanceId: inst,
			LocalRunId: "lr-" + execID, Epoch: 1, Status: messages.RunRunning},
			Entry: &messages.LedgerEntry{Kind: messages.KindExecutionStarted, ExecutionId: execID}}
	}
	// Assigned: one write holds the slot, creates the run running under the execution and
	// appends the decision's entries, then the start's.
	res, held, started, err := a.AssignAndStart(e.ctx, assignment(run("r1", "t1"), "i1", 1, store.NewRunVersion), start("r1", "x1", "i1"))
	noErr(t, err)
	equal(t, "result", res, store.Assigned)
	equal(t, "held", held, 1)
	equal(t, "created", started.Created, true)
	equal(t, "start entry seq", started.Entry.GetSeq(), int64(3))
	got, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "run", fmt.Sprint(got.Status, got.ExecutionId, got.LocalRunId, got.AssignedRuntimeInstanceId), fmt.Sprint(messages.RunRunning, "x1", "lr-x1", "i1"))
	x, _, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "execution epoch", x.GetEpoch(), int64(1))
	led, err := e.st.ReadLedger(e.ctx, "r1", 0, 0)
	noErr(t, err)
	kinds := make([]string, 0, len(led))
	for _, le := range led {
		kinds = append(kinds, le.Kind)
	}
	equal(t, "ledger", fmt.Sprint(kinds), fmt.Sprint([]string{messages.KindAdmission, messages.KindReservation, messages.KindExecutionStarted}))

	// Refused assignments write no start: the instance is full, or the run changed.
	res, _, started, err = a.AssignAndStart(e.ctx, assignment(run("r2", "t1"), "i1", 1, store.NewRunVersion), start("r2", "x2", "i1"))
	noErr(t, err)
	equal(t, "full", fmt.Sprint(res, started.Created), fmt.Sprint(store.InstanceFull, false))
	_, err = e.st.GetRun(e.ctx, "r2")
	isErr(t, err, store.ErrNotFound)
	_, _, err = e.st.GetExecution(e.ctx, "x2")
	isErr(t, err, store.ErrNotFound)
	r3 := queuedRun(t, e, "r3")
	_, err = e.st.UpdateRun(e.ctx, "r3", func(r *messages.SharedRun) error { r.FailureReason = "moved on"; return nil })
	noErr(t, err)
	res, _, _, err = a.AssignAndStart(e.ctx, assignment(r3, "i2", 5, store.CreatedRunVersion), start("r3", "x3", "i2"))
	noErr(t, err)
	equal(t, "changed", res, store.RunChanged)
	_, _, err = e.st.GetExecution(e.ctx, "x3")
	isErr(t, err, store.ErrNotFound)

	// A start that is refused (its execution exists at another epoch) refuses the assignment:
	// no hold, the run still queued.
	noErr(t, e.st.CreateExecution(e.ctx, &messages.Execution{ExecutionId: "x4", SharedRunId: "r4", Epoch: 2, Status: messages.RunRunning}))
	r4 := queuedRun(t, e, "r4")
	_, _, _, err = a.AssignAndStart(e.ctx, assignment(r4, "i3", 5, store.CreatedRunVersion), start("r4", "x4", "i3"))
	isErr(t, err, store.ErrStaleEpoch)
	n, err := e.st.ReservationCount(e.ctx, "i3")
	noErr(t, err)
	equal(t, "holds after a refused start", n, 0)
	got, err = e.st.GetRun(e.ctx, "r4")
	noErr(t, err)
	equal(t, "run after a refused start", got.Status, messages.RunQueued)
	depth(t, e, 2, 0) // r3 and r4

	// A start for another run or instance than the assignment's is refused outright.
	_, _, _, err = a.AssignAndStart(e.ctx, assignment(r4, "i3", 5, store.CreatedRunVersion), start("r4", "x5", "i9"))
	if err == nil {
		t.Fatal("a start naming another instance than the assignment's was accepted")
	}
}
