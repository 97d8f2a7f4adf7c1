package storetest

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var execLifecycleTests = []contractTest{
	{"StartExecution_createsAndMarks", testStartCreatesAndMarks},
	{"StartExecution_repeatedWritesOnce", testStartRepeated},
	{"StartExecution_takesAnExistingExecution", testStartExistingExecution},
	{"StartExecution_movedRunWritesNothing", testStartMoved},
	{"StartExecution_staleEpochWritesNothing", testStartStaleEpoch},
	{"StartExecution_missingRun", testStartMissingRun},
	{"FinishExecution_endsAll", testFinishEndsAll},
	{"FinishExecution_repeatedMetersOnce", testFinishRepeated},
	{"FinishExecution_staleEpochWritesNothing", testFinishStaleEpoch},
	{"FinishExecution_leavesAnEndedOrMovedRun", testFinishLeavesRun},
	{"FinishExecution_missing", testFinishMissing},
}

// lifecycle returns e's store as a store.ExecutionLifecycle, or skips the test.
func lifecycle(t *testing.T, e *env) store.ExecutionLifecycle {
	t.Helper()
	l, ok := e.st.(store.ExecutionLifecycle)
	if !ok {
		t.Skip("backend has no store.ExecutionLifecycle")
	}
	return l
}

// dispatchedRun creates run id of tenant t1 dispatched to inst, holding a slot of inst and a
// tenant slot of t1.
func dispatchedRun(t *testing.T, e *env, id, inst string) *messages.SharedRun {
	t.Helper()
	r := run(id, "t1")
	r.Status, r.AssignedRuntimeInstanceId, r.PumpRuntimeInstanceId, r.Attempts = messages.RunDispatched, inst, "pump-a", 1
	r.Input, r.Snapshot = []byte(`{"in":1}`), &messages.ExecutionContextSnapshot{TenantId: "t1", UserId: "u1", Roles: []string{"a"}}
	created, _, err := e.st.CreateRun(e.ctx, r)
	noErr(t, err)
	ok, _, err := e.st.ReserveForTenant(e.ctx, inst, id, 10, "t1", 10, time.Minute)
	noErr(t, err)
	equal(t, "reserved "+id, ok, true)
	return created
}

// startOf is the start of run id's execution x<id> on inst with local run l<id>.
func startOf(id, inst string) store.ExecutionStart {
	return store.ExecutionStart{
		Execution: &messages.Execution{ExecutionId: "x" + id, SharedRunId: id, LocalRunId: "l" + id, RuntimeInstanceId: inst,
			PipelineKey: "p", Epoch: 1, Status: messages.RunRunning, Owner: "node-a", Input: []byte(`{"in":1}`)},
		Entry: &messages.LedgerEntry{Kind: messages.KindExecutionStarted, ExecutionId: "x" + id, Epoch: 1},
	}
}

func getRun(t *testing.T, e *env, id string) *messages.SharedRun {
	t.Helper()
	r, err := e.st.GetRun(e.ctx, id)
	noErr(t, err)
	return r
}

// listedAs reports whether run id is listed by status (the live-runs index for an active one).
func listedAs(t *testing.T, e *env, id, status string) bool {
	t.Helper()
	got, err := e.st.ListRuns(e.ctx, store.RunFilter{Status: status})
	noErr(t, err)
	for _, r := range got {
		if r.GetSharedRunId() == id {
			return true
		}
	}
	return false
}

// runVersion returns run id's record version (0 without store.Assigner).
func runVersion(t *testing.T, e *env, id string) int64 {
	t.Helper()
	a, ok := e.st.(store.Assigner)
	if !ok {
		return 0
	}
	_, v, err := a.GetRunVersion(e.ctx, id)
	noErr(t, err)
	return v
}

func testStartCreatesAndMarks(t *testing.T, e *env) {
	l := lifecycle(t, e)
	before := dispatchedRun(t, e, "r1", "i1")
	ver := runVersion(t, e, "r1")
	e.clock.Advance(time.Second)
	res, err := l.StartExecution(e.ctx, startOf("r1", "i1"))
	noErr(t, err)
	equal(t, "created", res.Created, true)
	if res.Entry == nil {
		t.Fatal("no entry appended")
	}
	equal(t, "entry seq", res.Entry.GetSeq(), int64(1))
	equal(t, "entry run", res.Entry.GetSharedRunId(), "r1")
	x, _, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	equal(t, "epoch", x.GetEpoch(), int64(1))
	equal(t, "owner", x.GetOwner(), "node-a")
	equal(t, "execution run", x.GetSharedRunId(), "r1")
	listed, err := e.st.ListExecutionsByInstance(e.ctx, "i1")
	noErr(t, err)
	equalIDs(t, "executions of i1", ids(listed, (*messages.Execution).GetExecutionId), []string{"xr1"})

	want := proto.Clone(before).(*messages.SharedRun)
	want.Status, want.ExecutionId, want.LocalRunId, want.UpdatedAt = messages.RunRunning, "xr1", "lr1", e.clock.Now().UnixNano()
	if got := getRun(t, e, "r1"); !proto.Equal(got, want) {
		t.Fatalf("run = %v, want %v", got, want)
	}
	l1 := readLedger(t, e, "r1")
	equal(t, "ledger", len(l1), 1)
	equal(t, "kind", l1[0].GetKind(), messages.KindExecutionStarted)
	equal(t, "listed running", listedAs(t, e, "r1", messages.RunRunning), true)
	if ver != 0 {
		equal(t, "run version", runVersion(t, e, "r1"), ver+1)
	}
}

// testStartRepeated: a start whose answer was lost, made again, finds the execution made and
// the run marked: nothing is written twice.
func testStartRepeated(t *testing.T, e *env) {
	l := lifecycle(t, e)
	dispatchedRun(t, e, "r1", "i1")
	_, err := l.StartExecution(e.ctx, startOf("r1", "i1"))
	noErr(t, err)
	marked := getRun(t, e, "r1")
	ver := runVersion(t, e, "r1")
	e.clock.Advance(time.Second)
	res, err := l.StartExecution(e.ctx, startOf("r1", "i1"))
	noErr(t, err)
	equal(t, "created again", res.Created, false)
	equal(t, "entry again", res.Entry == nil, true)
	equal(t, "ledger", len(readLedger(t, e, "r1")), 1)
	if got := getRun(t, e, "r1"); !proto.Equal(got, marked) {
		t.Fatalf("run rewritten: %v, want %v", got, marked)
	}
	equal(t, "run version", runVersion(t, e, "r1"), ver)
}

// testStartExistingExecution: an execution that exists (created by an earlier activation whose
// answer was lost) is taken as this one's and its run is marked.
func testStartExistingExecution(t *testing.T, e *env) {
	l := lifecycle(t, e)
	dispatchedRun(t, e, "r1", "i1")
	noErr(t, e.st.CreateExecution(e.ctx, startOf("r1", "i1").Execution))
	res, err := l.StartExecution(e.ctx, startOf("r1", "i1"))
	noErr(t, err)
	equal(t, "created", res.Created, false)
	equal(t, "entry appended", res.Entry != nil, true)
	r := getRun(t, e, "r1")
	equal(t, "status", r.GetStatus(), messages.RunRunning)
	equal(t, "execution", r.GetExecutionId(), "xr1")
}

// testStartMoved: a run that is not this instance's to start refuses with ErrRunMoved and
// nothing is written: no execution, no run change, no entry.
func testStartMoved(t *testing.T, e *env) {
	l := lifecycle(t, e)
	for _, tc := range []struct {
		name string
		set  func(r *messages.SharedRun)
	}{
		{"assigned elsewhere", func(r *messages.SharedRun) { r.AssignedRuntimeInstanceId = "i2" }},
		{"queued", func(r *messages.SharedRun) { r.Status = messages.RunQueued }}, // requeued, still naming i1
		{"another execution", func(r *messages.SharedRun) { r.Status, r.ExecutionId = messages.RunRunning, "x-other" }},
		{"ended without it", func(r *messages.SharedRun) { r.Status = messages.RunCancelled }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "r-" + tc.name
			dispatchedRun(t, e, id, "i1")
			before, err := e.st.UpdateRun(e.ctx, id, func(r *messages.SharedRun) error { tc.set(r); return nil })
			noErr(t, err)
			_, err = l.StartExecution(e.ctx, startOf(id, "i1"))
			isErr(t, err, store.ErrRunMoved)
			_, _, err = e.st.GetExecution(e.ctx, "x"+id)
			isErr(t, err, store.ErrNotFound)
			if got := getRun(t, e, id); !proto.Equal(got, before) {
				t.Fatalf("run = %v, want %v", got, before)
			}
			equal(t, "ledger", len(readLedger(t, e, id)), 0)
		})
	}
	t.Run("ended by it", func(t *testing.T) {
		dispatchedRun(t, e, "r2", "i1")
		_, err := l.StartExecution(e.ctx, startOf("r2", "i1"))
		noErr(t, err)
		ended, err := e.st.UpdateRun(e.ctx, "r2", func(r *messages.SharedRun) error { r.Status = messages.RunSucceeded; return nil })
		noErr(t, err)
		res, err := l.StartExecution(e.ctx, startOf("r2", "i1"))
		noErr(t, err)
		equal(t, "entry", res.Entry == nil, true)
		if got := getRun(t, e, "r2"); !proto.Equal(got, ended) {
			t.Fatalf("ended run rewritten: %v", got)
		}
	})
}

// testStartStaleEpoch: an existing execution that a recovery fenced since (a new epoch) is not
// started under the old one, and its run is not marked.
func testStartStaleEpoch(t *testing.T, e *env) {
	l := lifecycle(t, e)
	before := dispatchedRun(t, e, "r1", "i1")
	noErr(t, e.st.CreateExecution(e.ctx, startOf("r1", "i1").Execution))
	_, _, err := e.st.FenceExecution(e.ctx, "xr1", "recovery:a", "i1")
	noErr(t, err)
	_, err = l.StartExecution(e.ctx, startOf("r1", "i1"))
	isErr(t, err, store.ErrStaleEpoch)
	if got := getRun(t, e, "r1"); !proto.Equal(got, before) {
		t.Fatalf("run = %v, want %v", got, before)
	}
	equal(t, "ledger", len(readLedger(t, e, "r1")), 0)
}

func testStartMissingRun(t *testing.T, e *env) {
	_, err := lifecycle(t, e).StartExecution(e.ctx, startOf("r1", "i1"))
	isErr(t, err, store.ErrNotFound)
	_, _, err = e.st.GetExecution(e.ctx, "xr1")
	isErr(t, err, store.ErrNotFound)
}

// startedRun is dispatchedRun started by StartExecution (execution xr<id> at epoch 1), with a
// committed step.
func startedRun(t *testing.T, e *env, id, inst string) {
	t.Helper()
	dispatchedRun(t, e, id, inst)
	_, err := lifecycle(t, e).StartExecution(e.ctx, startOf(id, inst))
	noErr(t, err)
	noErr(t, commit(t, e, stepCommit("x"+id, 1, "a", messages.StepSucceeded, entry(id, messages.KindStepSucceeded)))[0])
}

// finishOf is the successful end of run id's execution x<id> at epoch on inst.
func finishOf(id, inst string, epoch int64) store.ExecutionFinish {
	return store.ExecutionFinish{ExecutionID: "x" + id, Epoch: epoch, RunID: id, Status: messages.RunSucceeded,
		Output:     []byte(`{"out":"` + string(bigText(300)) + `"}`),
		Entry:      &messages.LedgerEntry{Kind: messages.KindRunSucceeded, ExecutionId: "x" + id, Epoch: epoch},
		Usage:      &messages.UsageEvent{Kind: "run", TenantId: "t1", SharedRunId: id, ExecutionId: "x" + id},
		InstanceID: inst}
}

// bigText is n bytes of text (an output whose length takes more than one varint byte).
func bigText(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// runEvents counts t1's usage events of kind run.
func runEvents(t *testing.T, e *env) int {
	t.Helper()
	got, err := e.st.ListUsage(e.ctx, store.UsageFilter{TenantID: "t1"})
	noErr(t, err)
	n := 0
	for _, u := range got {
		if u.GetKind() == "run" {
			n++
		}
	}
	return n
}

func testFinishEndsAll(t *testing.T, e *env) {
	l := lifecycle(t, e)
	startedRun(t, e, "r1", "i1")
	dispatchedRun(t, e, "r2", "i1") // another run's holds stay
	before := getRun(t, e, "r1")
	ver := runVersion(t, e, "r1")
	e.clock.Advance(time.Second)
	f := finishOf("r1", "i1", 1)
	res, err := l.FinishExecution(e.ctx, f)
	noErr(t, err)
	equal(t, "changed", res.Changed, true)
	if res.Entry == nil {
		t.Fatal("no entry appended")
	}
	equal(t, "entry seq", res.Entry.GetSeq(), int64(3))

	x, steps, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	equal(t, "execution status", x.GetStatus(), messages.RunSucceeded)
	equal(t, "execution output", string(x.GetOutput()), string(f.Output))
	equal(t, "execution epoch", x.GetEpoch(), int64(1))
	equal(t, "execution input kept", string(x.GetInput()), `{"in":1}`)
	equal(t, "steps kept", len(steps), 1)
	listed, err := e.st.ListExecutionsByInstance(e.ctx, "i1")
	noErr(t, err)
	equal(t, "listed by instance", len(listed), 0)

	want := proto.Clone(before).(*messages.SharedRun)
	want.Status, want.Output, want.UpdatedAt = messages.RunSucceeded, f.Output, e.clock.Now().UnixNano()
	if got := getRun(t, e, "r1"); !proto.Equal(got, want) {
		t.Fatalf("run = %v, want %v", got, want)
	}
	l1 := readLedger(t, e, "r1")
	equal(t, "ledger", len(l1), 3)
	equal(t, "last kind", l1[2].GetKind(), messages.KindRunSucceeded)
	equal(t, "run events", runEvents(t, e), 1)
	equal(t, "listed running", listedAs(t, e, "r1", messages.RunRunning), false)
	equal(t, "listed succeeded", listedAs(t, e, "r1", messages.RunSucceeded), true)
	equal(t, "instance holds", holds(t, e, "i1"), 1)
	equal(t, "tenant holds", holds(t, e, store.TenantHolds("t1")), 1)
	if ver != 0 {
		equal(t, "run version", runVersion(t, e, "r1"), ver+1)
	}
}

// testFinishRepeated: a finish made again (its answer was lost, or a second finisher) ends
// nothing twice: one terminal entry, one usage event.
func testFinishRepeated(t *testing.T, e *env) {
	l := lifecycle(t, e)
	startedRun(t, e, "r1", "i1")
	_, err := l.FinishExecution(e.ctx, finishOf("r1", "i1", 1))
	noErr(t, err)
	ended := getRun(t, e, "r1")
	res, err := l.FinishExecution(e.ctx, finishOf("r1", "i1", 1))
	noErr(t, err)
	equal(t, "changed again", res.Changed, false)
	equal(t, "ledger", len(readLedger(t, e, "r1")), 3)
	equal(t, "run events", runEvents(t, e), 1)
	if got := getRun(t, e, "r1"); !proto.Equal(got, ended) {
		t.Fatalf("run rewritten: %v, want %v", got, ended)
	}
}

// testFinishStaleEpoch: a finish under an epoch that a recovery replaced is fenced and writes
// nothing: the execution, the run, the ledger, the usage and the holds stay as they were.
func testFinishStaleEpoch(t *testing.T, e *env) {
	l := lifecycle(t, e)
	startedRun(t, e, "r1", "i1")
	_, _, err := e.st.FenceExecution(e.ctx, "xr1", "recovery:a", "i1")
	noErr(t, err)
	beforeRun := getRun(t, e, "r1")
	beforeExec, _, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	_, err = l.FinishExecution(e.ctx, finishOf("r1", "i1", 1))
	isErr(t, err, store.ErrStaleEpoch)
	x, _, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	if !proto.Equal(x, beforeExec) {
		t.Fatalf("execution = %v, want %v", x, beforeExec)
	}
	if got := getRun(t, e, "r1"); !proto.Equal(got, beforeRun) {
		t.Fatalf("run = %v, want %v", got, beforeRun)
	}
	equal(t, "ledger", len(readLedger(t, e, "r1")), 2)
	equal(t, "run events", runEvents(t, e), 0)
	equal(t, "instance holds", holds(t, e, "i1"), 1)
	equal(t, "tenant holds", holds(t, e, store.TenantHolds("t1")), 1)
}

// testFinishLeavesRun: the execution of a run that ended otherwise (cancelled) or that names
// another execution ends and drops its hold, and leaves the run, its ledger and usage alone.
func testFinishLeavesRun(t *testing.T, e *env) {
	l := lifecycle(t, e)
	for _, tc := range []struct {
		name string
		set  func(r *messages.SharedRun)
	}{
		{"cancelled", func(r *messages.SharedRun) { r.Status = messages.RunCancelled }},
		{"another execution", func(r *messages.SharedRun) { r.ExecutionId = "x-other" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "r-" + tc.name
			startedRun(t, e, id, "i1")
			before, err := e.st.UpdateRun(e.ctx, id, func(r *messages.SharedRun) error { tc.set(r); return nil })
			noErr(t, err)
			res, err := l.FinishExecution(e.ctx, finishOf(id, "i1", 1))
			noErr(t, err)
			equal(t, "changed", res.Changed, false)
			if got := getRun(t, e, id); !proto.Equal(got, before) {
				t.Fatalf("run = %v, want %v", got, before)
			}
			x, _, err := e.st.GetExecution(e.ctx, "x"+id)
			noErr(t, err)
			equal(t, "execution status", x.GetStatus(), messages.RunSucceeded)
			equal(t, "ledger", len(readLedger(t, e, id)), 2)
			equal(t, "run events", runEvents(t, e), 0)
			equal(t, "instance holds", holds(t, e, "i1"), 0)
			equal(t, "tenant holds", holds(t, e, store.TenantHolds("t1")), 0)
		})
	}
}

func testFinishMissing(t *testing.T, e *env) {
	l := lifecycle(t, e)
	_, err := l.FinishExecution(e.ctx, finishOf("r1", "i1", 1))
	isErr(t, err, store.ErrNotFound)
	dispatchedRun(t, e, "r1", "i1")
	_, err = l.FinishExecution(e.ctx, finishOf("r1", "i1", 1))
	isErr(t, err, store.ErrNotFound)
}
