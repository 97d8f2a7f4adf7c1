package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var executionTests = []contractTest{
	{"CreateExecution_exists", testCreateExecution},
	{"AcquireExecution_bumpsEpoch", testAcquireExecution},
	{"FenceExecution_onlyFromInstance", testFenceExecution},
	{"CommitSteps_storesSteps", testCommitStores},
	{"CommitSteps_fencedAfterAcquire", testCommitFenced},
	{"CommitSteps_doubleSuccess", testCommitDoubleSuccess},
	{"CommitSteps_noWriteOverSuccess", testCommitNoWriteOverSuccess},
	{"CommitSteps_mixedBatch", testCommitMixedBatch},
	{"CommitSteps_appendedAsStored", testCommitAppended},
	{"CommitSteps_concurrentLedger", testCommitConcurrentLedger},
	{"UpdateExecution_fenced", testUpdateExecution},
	{"ListExecutionsByInstance_index", testListExecutionsByInstance},
}

func execution(id, runID, inst string) *messages.Execution {
	return &messages.Execution{ExecutionId: id, SharedRunId: runID, RuntimeInstanceId: inst,
		PipelineKey: "p", Epoch: 1, Status: messages.RunRunning}
}

func createExecution(t *testing.T, e *env, x *messages.Execution) {
	t.Helper()
	noErr(t, e.st.CreateExecution(e.ctx, x))
}

func stepCommit(execID string, epoch int64, stepID, status string, ledger ...*messages.LedgerEntry) store.StepCommit {
	return store.StepCommit{ExecutionID: execID, Epoch: epoch,
		Step:   &messages.StepState{StepId: stepID, Status: status, Attempts: 1, Output: []byte(`{"ok":true}`)},
		Ledger: ledger}
}

func entry(runID, kind string) *messages.LedgerEntry {
	return &messages.LedgerEntry{SharedRunId: runID, Kind: kind}
}

func commit(t *testing.T, e *env, commits ...store.StepCommit) []error {
	t.Helper()
	errs, err := e.st.CommitSteps(e.ctx, commits)
	noErr(t, err)
	equal(t, "len(errs)", len(errs), len(commits))
	return errs
}

func readLedger(t *testing.T, e *env, runID string) []*messages.LedgerEntry {
	t.Helper()
	got, err := e.st.ReadLedger(e.ctx, runID, 0, 0)
	noErr(t, err)
	return got
}

func testCreateExecution(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	isErr(t, e.st.CreateExecution(e.ctx, execution("x1", "r2", "i1")), store.ErrExists)
	x, steps, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "run", x.GetSharedRunId(), "r1")
	equal(t, "epoch", x.GetEpoch(), int64(1))
	equal(t, "steps", len(steps), 0)
	_, _, err = e.st.GetExecution(e.ctx, "missing")
	isErr(t, err, store.ErrNotFound)
}

func testAcquireExecution(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	e.clock.Advance(time.Second)
	ep, err := e.st.AcquireExecution(e.ctx, "x1", "node2", "i2")
	noErr(t, err)
	equal(t, "epoch", ep, int64(2))
	x, _, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "stored epoch", x.GetEpoch(), int64(2))
	equal(t, "owner", x.GetOwner(), "node2")
	equal(t, "instance", x.GetRuntimeInstanceId(), "i2")
	equal(t, "UpdatedAt", x.GetUpdatedAt(), epoch.Add(time.Second).UnixNano())
	ep, err = e.st.AcquireExecution(e.ctx, "x1", "node3", "i3")
	noErr(t, err)
	equal(t, "epoch again", ep, int64(3))
	_, err = e.st.AcquireExecution(e.ctx, "missing", "n", "i")
	isErr(t, err, store.ErrNotFound)
}

func testFenceExecution(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	// A recovery with an old view (the run was on i0) cannot fence i1's activation.
	ep, fenced, err := e.st.FenceExecution(e.ctx, "x1", "recovery:a", "i0")
	noErr(t, err)
	equal(t, "fenced from another instance", fenced, false)
	equal(t, "epoch unchanged", ep, int64(1))
	// From its own instance it fences, and clears the instance.
	ep, fenced, err = e.st.FenceExecution(e.ctx, "x1", "recovery:a", "i1")
	noErr(t, err)
	equal(t, "fenced", fenced, true)
	equal(t, "epoch", ep, int64(2))
	x, _, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "stored epoch", x.GetEpoch(), int64(2))
	equal(t, "owner", x.GetOwner(), "recovery:a")
	equal(t, "instance cleared", x.GetRuntimeInstanceId(), "")
	byInst, err := e.st.ListExecutionsByInstance(e.ctx, "i1")
	noErr(t, err)
	equal(t, "unindexed from i1", len(byInst), 0)
	// An execution of no instance is fenced again (a second round, any view).
	ep, fenced, err = e.st.FenceExecution(e.ctx, "x1", "recovery:b", "i0")
	noErr(t, err)
	equal(t, "fenced when unowned", fenced, true)
	equal(t, "epoch again", ep, int64(3))
	// A new activation owns it: old views no longer fence.
	_, err = e.st.AcquireExecution(e.ctx, "x1", "node2", "i2")
	noErr(t, err)
	ep, fenced, err = e.st.FenceExecution(e.ctx, "x1", "recovery:c", "i1")
	noErr(t, err)
	equal(t, "not fenced after a newer acquire", fenced, false)
	equal(t, "epoch of the activation", ep, int64(4))
	_, _, err = e.st.FenceExecution(e.ctx, "missing", "r", "i")
	isErr(t, err, store.ErrNotFound)
}

func testCommitStores(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	errs := commit(t, e,
		stepCommit("x1", 1, "b", messages.StepRunning),
		stepCommit("x1", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)),
		stepCommit("x1", 1, "b", messages.StepSucceeded))
	for _, err := range errs {
		noErr(t, err)
	}
	_, steps, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equalIDs(t, "steps", ids(steps, (*messages.StepState).GetStepId), []string{"a", "b"})
	equal(t, "b status", steps[1].GetStatus(), messages.StepSucceeded)
	equal(t, "a epoch", steps[0].GetEpoch(), int64(1))
	equal(t, "a output", string(steps[0].GetOutput()), `{"ok":true}`)
	led := readLedger(t, e, "r1")
	equal(t, "ledger len", len(led), 1)
	equal(t, "ledger seq", led[0].GetSeq(), int64(1))
	equal(t, "ledger at", led[0].GetAt(), epoch.UnixNano())
}

func testCommitFenced(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	errs := commit(t, e, stepCommit("x1", 1, "a", messages.StepRunning, entry("r1", messages.KindStepStarted)))
	noErr(t, errs[0])
	ep, err := e.st.AcquireExecution(e.ctx, "x1", "node2", "i2")
	noErr(t, err)
	errs = commit(t, e, stepCommit("x1", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)),
		stepCommit("x1", 1, "z", messages.StepRunning))
	isErr(t, errs[0], store.ErrStaleEpoch)
	isErr(t, errs[1], store.ErrStaleEpoch)
	_, steps, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equalIDs(t, "steps", ids(steps, (*messages.StepState).GetStepId), []string{"a"})
	equal(t, "status kept", steps[0].GetStatus(), messages.StepRunning)
	equal(t, "ledger after stale", len(readLedger(t, e, "r1")), 1)

	errs = commit(t, e, stepCommit("x1", ep, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)))
	noErr(t, errs[0])
	_, steps, err = e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "new owner status", steps[0].GetStatus(), messages.StepSucceeded)
	equal(t, "new owner epoch", steps[0].GetEpoch(), ep)
	equal(t, "ledger after new owner", len(readLedger(t, e, "r1")), 2)
	// A commit from the future is stale too.
	errs = commit(t, e, stepCommit("x1", ep+1, "b", messages.StepRunning))
	isErr(t, errs[0], store.ErrStaleEpoch)
}

func testCommitDoubleSuccess(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	errs := commit(t, e, stepCommit("x1", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)))
	noErr(t, errs[0])
	second := stepCommit("x1", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded))
	second.Step.Output = []byte(`"second"`)
	errs = commit(t, e, second)
	isErr(t, errs[0], store.ErrAlreadyCommitted)
	_, steps, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "output kept", string(steps[0].GetOutput()), `{"ok":true}`)
	equal(t, "ledger len", len(readLedger(t, e, "r1")), 1)
	// Both in one batch: the second loses.
	errs = commit(t, e, stepCommit("x1", 1, "b", messages.StepSucceeded), stepCommit("x1", 1, "b", messages.StepSucceeded))
	noErr(t, errs[0])
	isErr(t, errs[1], store.ErrAlreadyCommitted)
}

// testCommitNoWriteOverSuccess: once a step has succeeded, no write of any status replaces it
// (a "running" write that overwrote it would let a second success through), in separate calls
// and within one batch; nothing of a refused write lands, ledger included; a stale write over
// a succeeded step is reported stale.
func testCommitNoWriteOverSuccess(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	noErr(t, commit(t, e, stepCommit("x1", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)))[0])
	for _, status := range []string{messages.StepRunning, messages.StepPending, messages.StepFailed, messages.StepSucceeded} {
		w := stepCommit("x1", 1, "a", status, entry("r1", messages.KindStepStarted))
		w.Step.Attempts, w.Step.Output = 2, []byte(`"overwritten"`)
		isErr(t, commit(t, e, w)[0], store.ErrAlreadyCommitted)
	}
	// The bypass this guards against: a running write then a second success, in one batch.
	errs := commit(t, e,
		stepCommit("x1", 1, "a", messages.StepRunning, entry("r1", messages.KindStepStarted)),
		stepCommit("x1", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)))
	isErr(t, errs[0], store.ErrAlreadyCommitted)
	isErr(t, errs[1], store.ErrAlreadyCommitted)
	_, steps, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "steps", len(steps), 1)
	equal(t, "status kept", steps[0].GetStatus(), messages.StepSucceeded)
	equal(t, "attempts kept", steps[0].GetAttempts(), int32(1))
	equal(t, "output kept", string(steps[0].GetOutput()), `{"ok":true}`)
	equal(t, "ledger len", len(readLedger(t, e, "r1")), 1)

	// In one batch: a success, then a running write of the same step, then another step.
	errs = commit(t, e,
		stepCommit("x1", 1, "b", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)),
		stepCommit("x1", 1, "b", messages.StepRunning, entry("r1", messages.KindStepStarted)),
		stepCommit("x1", 1, "c", messages.StepRunning, entry("r1", messages.KindStepStarted)))
	noErr(t, errs[0])
	isErr(t, errs[1], store.ErrAlreadyCommitted)
	noErr(t, errs[2])
	_, steps, err = e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "b status", steps[1].GetStatus(), messages.StepSucceeded)
	kinds := ids(readLedger(t, e, "r1"), (*messages.LedgerEntry).GetKind)
	equalIDs(t, "ledger", kinds, []string{messages.KindStepSucceeded, messages.KindStepSucceeded, messages.KindStepStarted})

	// Steps that have not succeeded stay writable.
	noErr(t, commit(t, e, stepCommit("x1", 1, "c", messages.StepPending))[0])
	noErr(t, commit(t, e, stepCommit("x1", 1, "c", messages.StepSucceeded))[0])

	// The epoch is checked first: a fenced writer learns it is fenced.
	ep, err := e.st.AcquireExecution(e.ctx, "x1", "n2", "i2")
	noErr(t, err)
	isErr(t, commit(t, e, stepCommit("x1", ep-1, "a", messages.StepRunning))[0], store.ErrStaleEpoch)
	isErr(t, commit(t, e, stepCommit("x1", ep, "a", messages.StepRunning))[0], store.ErrAlreadyCommitted)
}

func testCommitMixedBatch(t *testing.T, e *env) {
	createExecution(t, e, execution("good", "r1", "i1"))
	createExecution(t, e, execution("stale", "r2", "i1"))
	createExecution(t, e, execution("done", "r3", "i1"))
	_, err := e.st.AcquireExecution(e.ctx, "stale", "n", "i1")
	noErr(t, err)
	noErr(t, commit(t, e, stepCommit("done", 1, "a", messages.StepSucceeded))[0])

	errs := commit(t, e,
		stepCommit("good", 1, "a", messages.StepSucceeded, entry("r1", messages.KindStepSucceeded)),
		stepCommit("stale", 1, "a", messages.StepSucceeded, entry("r2", messages.KindStepSucceeded)),
		stepCommit("missing", 1, "a", messages.StepSucceeded, entry("r9", messages.KindStepSucceeded)),
		stepCommit("done", 1, "a", messages.StepSucceeded, entry("r3", messages.KindStepSucceeded)),
		stepCommit("good", 1, "b", messages.StepRunning, entry("r1", messages.KindStepStarted)))
	want := []error{nil, store.ErrStaleEpoch, store.ErrNotFound, store.ErrAlreadyCommitted, nil}
	for i, w := range want {
		if w == nil {
			if errs[i] != nil {
				t.Fatalf("errs[%d] = %v, want nil", i, errs[i])
			}
			continue
		}
		if !errors.Is(errs[i], w) {
			t.Fatalf("errs[%d] = %v, want %v", i, errs[i], w)
		}
	}
	kinds := func(l []*messages.LedgerEntry) []string { return ids(l, (*messages.LedgerEntry).GetKind) }
	equalIDs(t, "r1 ledger", kinds(readLedger(t, e, "r1")), []string{messages.KindStepSucceeded, messages.KindStepStarted})
	equal(t, "r2 ledger", len(readLedger(t, e, "r2")), 0)
	equal(t, "r3 ledger", len(readLedger(t, e, "r3")), 0)
	equal(t, "r9 ledger", len(readLedger(t, e, "r9")), 0)
	_, steps, err := e.st.GetExecution(e.ctx, "stale")
	noErr(t, err)
	equal(t, "stale steps", len(steps), 0)
}

// testCommitAppended: a written commit reports its ledger entries as a reader gets them (Seq,
// At and the execution's run filled in); a refused one reports none; the caller's entries are
// not modified.
func testCommitAppended(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	createExecution(t, e, execution("x2", "r2", "i1"))
	_, err := e.st.AcquireExecution(e.ctx, "x2", "n", "i1")
	noErr(t, err)
	noErr(t, commit(t, e, stepCommit("x1", 1, "a", messages.StepRunning, entry("r1", messages.KindStepStarted)))[0])
	mine := entry("", messages.KindStepSucceeded) // the execution's run
	commits := []store.StepCommit{
		stepCommit("x1", 1, "a", messages.StepSucceeded, mine, entry("r1", messages.KindStepStarted)),
		stepCommit("x2", 1, "a", messages.StepSucceeded, entry("r2", messages.KindStepSucceeded)),
	}
	errs, err := e.st.CommitSteps(e.ctx, commits)
	noErr(t, err)
	noErr(t, errs[0])
	if !errors.Is(errs[1], store.ErrStaleEpoch) {
		t.Fatalf("stale commit = %v, want ErrStaleEpoch", errs[1])
	}
	equal(t, "caller's entry seq", mine.GetSeq(), int64(0))
	equal(t, "caller's entry run", mine.GetSharedRunId(), "")
	equal(t, "refused commit's appended", len(commits[1].Appended), 0)
	stored := readLedger(t, e, "r1")[1:]
	equal(t, "appended", len(commits[0].Appended), len(stored))
	for i, got := range commits[0].Appended {
		if !proto.Equal(got, stored[i]) {
			t.Fatalf("appended[%d] = %v, stored %v", i, got, stored[i])
		}
	}
}

func testCommitConcurrentLedger(t *testing.T, e *env) {
	const writers, perWriter = 8, 20
	for w := range writers {
		createExecution(t, e, execution(fmt.Sprintf("x%d", w), "r1", "i1"))
	}
	runConcurrently(t, writers, func(w int) error {
		for i := range perWriter {
			errs, err := e.st.CommitSteps(e.ctx, []store.StepCommit{stepCommit(fmt.Sprintf("x%d", w), 1,
				fmt.Sprintf("s%02d", i), messages.StepSucceeded, entry("r1", messages.KindStepSucceeded))})
			if err != nil {
				return err
			}
			if errs[0] != nil {
				return fmt.Errorf("commit x%d/s%02d: %w", w, i, errs[0])
			}
		}
		return nil
	})
	checkContiguous(t, readLedger(t, e, "r1"), writers*perWriter)
}

func checkContiguous(t *testing.T, l []*messages.LedgerEntry, n int) {
	t.Helper()
	equal(t, "ledger len", len(l), n)
	for i, en := range l {
		if en.GetSeq() != int64(i+1) {
			t.Fatalf("ledger[%d].Seq = %d, want %d", i, en.GetSeq(), i+1)
		}
	}
}

func testUpdateExecution(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	ep, err := e.st.AcquireExecution(e.ctx, "x1", "n", "i1")
	noErr(t, err)
	_, err = e.st.UpdateExecution(e.ctx, "x1", 1, func(x *messages.Execution) error {
		x.Status = messages.RunFailed
		return nil
	})
	isErr(t, err, store.ErrStaleEpoch)
	got, err := e.st.UpdateExecution(e.ctx, "x1", ep, func(x *messages.Execution) error {
		x.Status = messages.RunPaused
		return nil
	})
	noErr(t, err)
	equal(t, "returned status", got.GetStatus(), messages.RunPaused)
	x, _, err := e.st.GetExecution(e.ctx, "x1")
	noErr(t, err)
	equal(t, "stored status", x.GetStatus(), messages.RunPaused)
	equal(t, "stored epoch", x.GetEpoch(), ep)
	boom := errors.New("boom")
	_, err = e.st.UpdateExecution(e.ctx, "x1", ep, func(*messages.Execution) error { return boom })
	isErr(t, err, boom)
	_, err = e.st.UpdateExecution(e.ctx, "missing", 1, func(*messages.Execution) error { return nil })
	isErr(t, err, store.ErrNotFound)
}

func testListExecutionsByInstance(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	done := execution("x2", "r2", "i1")
	done.Status = messages.RunSucceeded
	createExecution(t, e, done)
	createExecution(t, e, execution("x3", "r3", "i2"))
	paused := execution("x4", "r4", "i1")
	paused.Status = messages.RunPaused
	createExecution(t, e, paused)

	list := func(inst string) []string {
		t.Helper()
		got, err := e.st.ListExecutionsByInstance(e.ctx, inst)
		noErr(t, err)
		out := ids(got, (*messages.Execution).GetExecutionId)
		slices.Sort(out)
		return out
	}
	equalIDs(t, "i1", list("i1"), []string{"x1", "x4"})
	equalIDs(t, "i2", list("i2"), []string{"x3"})

	ep, err := e.st.AcquireExecution(e.ctx, "x3", "n", "i1")
	noErr(t, err)
	equalIDs(t, "i1 after acquire", list("i1"), []string{"x1", "x3", "x4"})
	equalIDs(t, "i2 after acquire", list("i2"), []string{})

	_, err = e.st.UpdateExecution(e.ctx, "x3", ep, func(x *messages.Execution) error {
		x.Status = messages.RunCancelled
		return nil
	})
	noErr(t, err)
	equalIDs(t, "i1 after cancel", list("i1"), []string{"x1", "x4"})
	equalIDs(t, "unknown", list("nope"), []string{})
}
