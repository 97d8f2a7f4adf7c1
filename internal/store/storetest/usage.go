package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// meteredCommit is stepCommit carrying the step's usage event (tenant t1).
func meteredCommit(execID string, epoch int64, stepID, status string, attempt int32) store.StepCommit {
	c := stepCommit(execID, epoch, stepID, status, entry("", messages.KindStepSucceeded))
	c.Step.Attempts = attempt
	c.Usage = &messages.UsageEvent{Kind: "step", TenantId: "t1", SharedRunId: "r1", ExecutionId: execID,
		StepId: stepID, Attempts: attempt, DurationNs: int64(time.Millisecond)}
	return c
}

// usageSteps lists the step ids of t1's usage events, by At then write order.
func usageSteps(t *testing.T, e *env) []string {
	t.Helper()
	got, err := e.st.ListUsage(e.ctx, store.UsageFilter{TenantID: "t1"})
	noErr(t, err)
	return ids(got, func(u *messages.UsageEvent) string { return u.GetKind() + ":" + u.GetStepId() })
}

// testCommitUsageExactlyOnce: a step's usage event is stored with its commit and only then: a
// successful commit adds exactly one, a repeated identical call, a commit over a succeeded step
// and a fenced (stale-epoch) commit add none, and none is lost from a mixed batch.
func testCommitUsageExactlyOnce(t *testing.T, e *env) {
	createExecution(t, e, execution("x1", "r1", "i1"))
	ok := meteredCommit("x1", 1, "a", messages.StepSucceeded, 1)
	noErr(t, commit(t, e, ok)[0])
	got, err := e.st.ListUsage(e.ctx, store.UsageFilter{TenantID: "t1"})
	noErr(t, err)
	equal(t, "events after one commit", len(got), 1)
	equal(t, "At set by the store", got[0].GetAt(), epoch.UnixNano())
	equal(t, "attempts", got[0].GetAttempts(), int32(1))

	isErr(t, commit(t, e, ok)[0], store.ErrAlreadyCommitted) // the same call replayed
	again := meteredCommit("x1", 1, "a", messages.StepSucceeded, 2)
	isErr(t, commit(t, e, again)[0], store.ErrAlreadyCommitted) // another attempt of a succeeded step
	equalIDs(t, "after replays", usageSteps(t, e), []string{"step:a"})

	// A write that the store accepts more than once (a failed attempt may be rewritten) still
	// meters its attempt once.
	failed := meteredCommit("x1", 1, "b", messages.StepFailed, 1)
	noErr(t, commit(t, e, failed)[0])
	noErr(t, commit(t, e, failed)[0])
	equalIDs(t, "one event per attempt", usageSteps(t, e), []string{"step:a", "step:b"})

	_, err = e.st.AcquireExecution(e.ctx, "x1", "node2", "i2")
	noErr(t, err)
	e.clock.Advance(time.Second)
	errs := commit(t, e,
		meteredCommit("x1", 1, "c", messages.StepSucceeded, 1), // fenced
		meteredCommit("x1", 2, "d", messages.StepSucceeded, 1), // written
		meteredCommit("x1", 2, "a", messages.StepSucceeded, 3), // already succeeded
		meteredCommit("missing", 2, "e", messages.StepSucceeded, 1))
	isErr(t, errs[0], store.ErrStaleEpoch)
	noErr(t, errs[1])
	isErr(t, errs[2], store.ErrAlreadyCommitted)
	isErr(t, errs[3], store.ErrNotFound)
	equalIDs(t, "after the mixed batch", usageSteps(t, e), []string{"step:a", "step:b", "step:d"})
	succeeded := 0
	for _, le := range readLedger(t, e, "r1") {
		if le.GetKind() == messages.KindStepSucceeded {
			succeeded++
		}
	}
	equal(t, "ledger entries of written commits", succeeded, 4) // a, b twice, d
}

// testUpdateRunAndMeter: a run's usage event is stored with the write that appends its entry,
// and not when fn appends nothing, fails, or returns an event without an entry.
func testUpdateRunAndMeter(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	ev := &messages.UsageEvent{Kind: "run", TenantId: "t1", SharedRunId: "r1", ExecutionId: "x1"}
	finish := func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		if messages.IsTerminalRun(r.Status) {
			return nil, nil, nil
		}
		r.Status = messages.RunSucceeded
		return &messages.LedgerEntry{Kind: messages.KindRunSucceeded, ExecutionId: "x1"}, ev, nil
	}
	boom := errors.New("boom")
	_, _, err = e.st.UpdateRunAndMeter(e.ctx, "r1", func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		return &messages.LedgerEntry{Kind: messages.KindRunFailed}, ev, boom
	})
	isErr(t, err, boom)
	_, _, err = e.st.UpdateRunAndMeter(e.ctx, "r1", func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		r.Status = messages.RunFailed
		return nil, ev, nil
	})
	if err == nil {
		t.Fatal("a usage event without a ledger entry was accepted")
	}
	equalIDs(t, "after refused writes", usageSteps(t, e), []string{})
	e.clock.Advance(time.Second)
	_, le, err := e.st.UpdateRunAndMeter(e.ctx, "r1", finish)
	noErr(t, err)
	equal(t, "entry seq", le.GetSeq(), int64(1))
	_, le, err = e.st.UpdateRunAndMeter(e.ctx, "r1", finish) // a finisher that lost the race
	noErr(t, err)
	if le != nil {
		t.Fatalf("a second finish appended %v", le)
	}
	got, err := e.st.ListUsage(e.ctx, store.UsageFilter{TenantID: "t1"})
	noErr(t, err)
	equalIDs(t, "one run event", ids(got, func(u *messages.UsageEvent) string { return u.GetKind() + ":" + u.GetSharedRunId() }), []string{"run:r1"})
	equal(t, "At set by the store", got[0].GetAt(), epoch.Add(time.Second).UnixNano())
	stored, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status", stored.GetStatus(), messages.RunSucceeded)
	equal(t, "ledger", len(readLedger(t, e, "r1")), 1)
}
