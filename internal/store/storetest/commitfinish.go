package storetest

import (
	"testing"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var commitFinishTests = []contractTest{
	{"CommitSteps_finishWrittenWithTheCommit", testCommitFinishWritten},
	{"CommitSteps_staleCommitFinishesNothing", testCommitFinishStale},
	{"CommitSteps_alreadyCommittedStillFinishes", testCommitFinishAlreadyCommitted},
	{"CommitSteps_missingRunKeepsTheCommit", testCommitFinishMissingRun},
	{"CommitSteps_finishBesideOtherCommits", testCommitFinishBatch},
}

// finisher skips the test unless e's store is a store.CommitFinisher.
func finisher(t *testing.T, e *env) {
	t.Helper()
	f, ok := e.st.(store.CommitFinisher)
	if !ok || !f.FinishesCommits() {
		t.Skip("backend writes no finish with a commit")
	}
	lifecycle(t, e)
}

// lastCommit is the commit of step b of run id's execution x<id> at epoch, carrying the run's
// finish and its Finished outcome.
func lastCommit(id, inst string, epoch int64) (store.StepCommit, *store.FinishOutcome) {
	out := &store.FinishOutcome{}
	c := stepCommit("x"+id, epoch, "b", messages.StepSucceeded, entry(id, messages.KindStepSucceeded))
	f := finishOf(id, inst, 0) // the commit's execution and epoch are the finish's
	f.ExecutionID = ""
	c.Finish, c.Finished = &f, out
	return c, out
}

// finished checks that run id and its execution ended with f's status and output, its
// entries after the commit's, and released its slots on inst.
func finished(t *testing.T, e *env, id, inst string, out *store.FinishOutcome, ledger int) {
	t.Helper()
	noErr(t, out.Err)
	equal(t, "finish changed", out.Result.Changed, true)
	l := readLedger(t, e, id)
	equal(t, "ledger", len(l), ledger)
	equal(t, "last kind", l[ledger-1].GetKind(), messages.KindRunSucceeded)
	equal(t, "finish entry seq", out.Result.Entry.GetSeq(), int64(ledger))
	equal(t, "run status", getRun(t, e, id).GetStatus(), messages.RunSucceeded)
	x, steps, err := e.st.GetExecution(e.ctx, "x"+id)
	noErr(t, err)
	equal(t, "execution status", x.GetStatus(), messages.RunSucceeded)
	equal(t, "steps", len(steps), 2)
	equal(t, "instance holds", holds(t, e, inst), 0)
	equal(t, "tenant holds", holds(t, e, store.TenantHolds("t1")), 0)
}

func testCommitFinishWritten(t *testing.T, e *env) {
	finisher(t, e)
	startedRun(t, e, "r1", "i1")
	c, out := lastCommit("r1", "i1", 1)
	errs := commit(t, e, c)
	noErr(t, errs[0])
	finished(t, e, "r1", "i1", out, 4)
	l := readLedger(t, e, "r1")
	equal(t, "commit entry before the finish", l[2].GetKind(), messages.KindStepSucceeded)
	equal(t, "run events", runEvents(t, e), 1)
}

func testCommitFinishStale(t *testing.T, e *env) {
	finisher(t, e)
	startedRun(t, e, "r1", "i1")
	c, out := lastCommit("r1", "i1", 2)
	errs := commit(t, e, c)
	isErr(t, errs[0], store.ErrStaleEpoch)
	isErr(t, out.Err, store.ErrStaleEpoch)
	equal(t, "finish changed", out.Result.Changed, false)
	equal(t, "ledger", len(readLedger(t, e, "r1")), 2)
	equal(t, "run status", getRun(t, e, "r1").GetStatus(), messages.RunRunning)
	x, steps, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	equal(t, "execution status", x.GetStatus(), messages.RunRunning)
	equal(t, "steps", len(steps), 1)
	equal(t, "instance holds", holds(t, e, "i1"), 1)
	equal(t, "run events", runEvents(t, e), 0)
}

// testCommitFinishAlreadyCommitted: a commit sent again with the finish (the first answer was
// lost before the finish was written) still ends the run, once.
func testCommitFinishAlreadyCommitted(t *testing.T, e *env) {
	finisher(t, e)
	startedRun(t, e, "r1", "i1")
	noErr(t, commit(t, e, stepCommit("xr1", 1, "b", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)))[0])
	c, out := lastCommit("r1", "i1", 1)
	errs := commit(t, e, c)
	isErr(t, errs[0], store.ErrAlreadyCommitted)
	finished(t, e, "r1", "i1", out, 4)
	c, out = lastCommit("r1", "i1", 1)
	errs = commit(t, e, c)
	isErr(t, errs[0], store.ErrAlreadyCommitted)
	noErr(t, out.Err)
	equal(t, "second finish changed", out.Result.Changed, false)
	equal(t, "ledger", len(readLedger(t, e, "r1")), 4)
	equal(t, "run events", runEvents(t, e), 1)
}

// testCommitFinishMissingRun: a finish refused (its run is gone) leaves the commit written.
func testCommitFinishMissingRun(t *testing.T, e *env) {
	finisher(t, e)
	noErr(t, e.st.CreateExecution(e.ctx, &messages.Execution{ExecutionId: "xr1", SharedRunId: "r1", Epoch: 1}))
	c, out := lastCommit("r1", "i1", 1)
	errs := commit(t, e, c)
	noErr(t, errs[0])
	isErr(t, out.Err, store.ErrNotFound)
	_, steps, err := e.st.GetExecution(e.ctx, "xr1")
	noErr(t, err)
	equal(t, "steps", len(steps), 1)
}

// testCommitFinishBatch: in one call, a finishing commit beside plain ones of other runs.
func testCommitFinishBatch(t *testing.T, e *env) {
	finisher(t, e)
	startedRun(t, e, "r1", "i1")
	startedRun(t, e, "r2", "i1")
	last, out := lastCommit("r1", "i1", 1)
	errs := commit(t, e,
		stepCommit("xr2", 1, "b", messages.StepSucceeded, entry("r2", messages.KindStepSucceeded)),
		last,
		stepCommit("xr2", 1, "c", messages.StepSucceeded, entry("r2", messages.KindStepSucceeded)))
	for _, err := range errs {
		noErr(t, err)
	}
	noErr(t, out.Err)
	equal(t, "r1 ledger", len(readLedger(t, e, "r1")), 4)
	equal(t, "r1 status", getRun(t, e, "r1").GetStatus(), messages.RunSucceeded)
	equal(t, "r2 ledger", len(readLedger(t, e, "r2")), 4)
	equal(t, "r2 status", getRun(t, e, "r2").GetStatus(), messages.RunRunning)
	equal(t, "instance holds", holds(t, e, "i1"), 1)
}
