package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var runTests = []contractTest{
	{"CreateRun_setsTimestamps", testCreateRunTimestamps},
	{"CreateRun_duplicateID", testCreateRunDuplicate},
	{"CreateRun_idempotent", testCreateRunIdempotent},
	{"GetRun_notFound", testGetRunNotFound},
	{"GetRun_freshCopy", testGetRunFreshCopy},
	{"GetRuns_orderAndMissing", testGetRunsOrderAndMissing},
	{"UpdateRun_applies", testUpdateRunApplies},
	{"UpdateRun_fnError", testUpdateRunFnError},
	{"UpdateRun_notFound", testUpdateRunNotFound},
	{"UpdateRun_concurrent", testUpdateRunConcurrent},
	{"UpdateRunAndAppend_together", testUpdateRunAndAppendTogether},
	{"UpdateRunAndAppend_fnError", testUpdateRunAndAppendFnError},
	{"UpdateRunAndAppend_concurrent", testUpdateRunAndAppendConcurrent},
	{"ListRuns_orderAndFilter", testListRunsOrderAndFilter},
	{"ScanRuns_pages", testScanRunsPages},
	{"ScanRuns_parked", testScanRunsParked},
}

func run(id, tenant string) *messages.SharedRun {
	return &messages.SharedRun{SharedRunId: id, TenantId: tenant, Status: messages.RunQueued, Pipeline: "p"}
}

func testCreateRunTimestamps(t *testing.T, e *env) {
	got, created, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	equal(t, "created", created, true)
	equal(t, "CreatedAt", got.GetCreatedAt(), epoch.UnixNano())
	equal(t, "UpdatedAt", got.GetUpdatedAt(), epoch.UnixNano())

	r := run("r2", "t1")
	r.CreatedAt, r.UpdatedAt = 7, 8
	_, _, err = e.st.CreateRun(e.ctx, r)
	noErr(t, err)
	stored, err := e.st.GetRun(e.ctx, "r2")
	noErr(t, err)
	equal(t, "kept CreatedAt", stored.GetCreatedAt(), int64(7))
	equal(t, "kept UpdatedAt", stored.GetUpdatedAt(), int64(8))
	equal(t, "Pipeline", stored.GetPipeline(), "p")
}

func testCreateRunDuplicate(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	_, _, err = e.st.CreateRun(e.ctx, run("r1", "t2"))
	isErr(t, err, store.ErrExists)
}

func testCreateRunIdempotent(t *testing.T, e *env) {
	a := run("a", "t1")
	a.IdempotencyKey = "k"
	_, created, err := e.st.CreateRun(e.ctx, a)
	noErr(t, err)
	equal(t, "first created", created, true)

	b := run("b", "t1")
	b.IdempotencyKey = "k"
	got, created, err := e.st.CreateRun(e.ctx, b)
	noErr(t, err)
	equal(t, "second created", created, false)
	equal(t, "existing id", got.GetSharedRunId(), "a")
	_, err = e.st.GetRun(e.ctx, "b")
	isErr(t, err, store.ErrNotFound)

	// The key is scoped by tenant.
	c := run("c", "t2")
	c.IdempotencyKey = "k"
	got, created, err = e.st.CreateRun(e.ctx, c)
	noErr(t, err)
	equal(t, "other tenant created", created, true)
	equal(t, "other tenant id", got.GetSharedRunId(), "c")

	// RunByIdempotencyKey finds each tenant's run of the key, and nothing for another key.
	got, err = e.st.RunByIdempotencyKey(e.ctx, "t1", "k")
	noErr(t, err)
	equal(t, "by key, t1", got.GetSharedRunId(), "a")
	got, err = e.st.RunByIdempotencyKey(e.ctx, "t2", "k")
	noErr(t, err)
	equal(t, "by key, t2", got.GetSharedRunId(), "c")
	_, err = e.st.RunByIdempotencyKey(e.ctx, "t1", "other")
	isErr(t, err, store.ErrNotFound)
	_, err = e.st.RunByIdempotencyKey(e.ctx, "t3", "k")
	isErr(t, err, store.ErrNotFound)
}

func testGetRunNotFound(t *testing.T, e *env) {
	_, err := e.st.GetRun(e.ctx, "missing")
	isErr(t, err, store.ErrNotFound)
}

func testGetRunsOrderAndMissing(t *testing.T, e *env) {
	for _, id := range []string{"r1", "r2"} {
		_, _, err := e.st.CreateRun(e.ctx, run(id, "t1"))
		noErr(t, err)
	}
	_, err := e.st.UpdateRun(e.ctx, "r2", func(r *messages.SharedRun) error { r.Status = messages.RunSucceeded; return nil })
	noErr(t, err)
	got, err := e.st.GetRuns(e.ctx, []string{"r2", "missing", "r1"})
	noErr(t, err)
	equal(t, "count", len(got), 3)
	equal(t, "first", got[0].GetSharedRunId(), "r2")
	equal(t, "first status", got[0].GetStatus(), messages.RunSucceeded)
	equal(t, "missing", got[1] == nil, true)
	equal(t, "third", got[2].GetSharedRunId(), "r1")
	none, err := e.st.GetRuns(e.ctx, nil)
	noErr(t, err)
	equal(t, "no ids", len(none), 0)
}

func testGetRunFreshCopy(t *testing.T, e *env) {
	in := run("r1", "t1")
	_, _, err := e.st.CreateRun(e.ctx, in)
	noErr(t, err)
	in.Status = messages.RunFailed // the store must not retain the caller's message
	got, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status", got.GetStatus(), messages.RunQueued)
	got.Status = messages.RunCancelled
	again, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status after mutating copy", again.GetStatus(), messages.RunQueued)
}

func testUpdateRunApplies(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	e.clock.Advance(time.Second)
	got, err := e.st.UpdateRun(e.ctx, "r1", func(r *messages.SharedRun) error {
		r.Status = messages.RunRunning
		r.AssignedRuntimeInstanceId = "i1"
		return nil
	})
	noErr(t, err)
	equal(t, "returned status", got.GetStatus(), messages.RunRunning)
	equal(t, "UpdatedAt", got.GetUpdatedAt(), epoch.Add(time.Second).UnixNano())
	stored, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "stored status", stored.GetStatus(), messages.RunRunning)
	equal(t, "stored instance", stored.GetAssignedRuntimeInstanceId(), "i1")
	equal(t, "stored UpdatedAt", stored.GetUpdatedAt(), epoch.Add(time.Second).UnixNano())
	equal(t, "stored CreatedAt", stored.GetCreatedAt(), epoch.UnixNano())
}

func testUpdateRunFnError(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	boom := errors.New("boom")
	_, err = e.st.UpdateRun(e.ctx, "r1", func(r *messages.SharedRun) error {
		r.Status = messages.RunFailed
		return boom
	})
	isErr(t, err, boom)
	stored, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status unchanged", stored.GetStatus(), messages.RunQueued)
}

func testUpdateRunNotFound(t *testing.T, e *env) {
	_, err := e.st.UpdateRun(e.ctx, "missing", func(*messages.SharedRun) error { return nil })
	isErr(t, err, store.ErrNotFound)
}

func testUpdateRunConcurrent(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	const n = 32
	runConcurrently(t, n, func(int) error {
		_, err := e.st.UpdateRun(e.ctx, "r1", func(r *messages.SharedRun) error {
			r.Attempts++
			return nil
		})
		return err
	})
	stored, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "attempts", stored.GetAttempts(), int32(n))
}

// testUpdateRunAndAppendTogether: the entry lands after the run's earlier entries with the
// next Seq, and a nil entry appends nothing.
func testUpdateRunAndAppendTogether(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	_, err = e.st.Append(e.ctx, &messages.LedgerEntry{SharedRunId: "r1", Kind: messages.KindStepSucceeded})
	noErr(t, err)
	e.clock.Advance(time.Second)
	got, entry, err := e.st.UpdateRunAndAppend(e.ctx, "r1", func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		r.Status = messages.RunSucceeded
		return &messages.LedgerEntry{Kind: messages.KindRunSucceeded, ExecutionId: "x1"}, nil
	})
	noErr(t, err)
	equal(t, "returned status", got.GetStatus(), messages.RunSucceeded)
	equal(t, "entry seq", entry.GetSeq(), int64(2))
	equal(t, "entry run", entry.GetSharedRunId(), "r1")
	equal(t, "entry at", entry.GetAt(), epoch.Add(time.Second).UnixNano())
	_, none, err := e.st.UpdateRunAndAppend(e.ctx, "r1", func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		r.Attempts++
		return nil, nil
	})
	noErr(t, err)
	if none != nil {
		t.Fatalf("a nil entry appended %v", none)
	}
	entries, err := e.st.ReadLedger(e.ctx, "r1", 0, 0)
	noErr(t, err)
	equal(t, "ledger length", len(entries), 2)
	equal(t, "last kind", entries[1].GetKind(), messages.KindRunSucceeded)
	equal(t, "last seq", entries[1].GetSeq(), int64(2))
	equal(t, "last execution", entries[1].GetExecutionId(), "x1")
	stored, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "stored status", stored.GetStatus(), messages.RunSucceeded)
	equal(t, "stored attempts", stored.GetAttempts(), int32(1))
}

// testUpdateRunAndAppendFnError: an error from fn writes neither the run nor the entry, and a
// missing run is ErrNotFound.
func testUpdateRunAndAppendFnError(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	boom := errors.New("boom")
	_, _, err = e.st.UpdateRunAndAppend(e.ctx, "r1", func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		r.Status = messages.RunFailed
		return &messages.LedgerEntry{Kind: messages.KindRunFailed}, boom
	})
	isErr(t, err, boom)
	stored, err := e.st.GetRun(e.ctx, "r1")
	noErr(t, err)
	equal(t, "status unchanged", stored.GetStatus(), messages.RunQueued)
	entries, err := e.st.ReadLedger(e.ctx, "r1", 0, 0)
	noErr(t, err)
	equal(t, "ledger length", len(entries), 0)
	_, _, err = e.st.UpdateRunAndAppend(e.ctx, "missing", func(*messages.SharedRun) (*messages.LedgerEntry, error) {
		return &messages.LedgerEntry{Kind: messages.KindRunFailed}, nil
	})
	isErr(t, err, store.ErrNotFound)
	entries, err = e.st.ReadLedger(e.ctx, "missing", 0, 0)
	noErr(t, err)
	equal(t, "no ledger for a missing run", len(entries), 0)
}

// testUpdateRunAndAppendConcurrent: racing finishers that each append only when they make the
// run terminal leave exactly one terminal entry (the guard and the append are one write).
func testUpdateRunAndAppendConcurrent(t *testing.T, e *env) {
	_, _, err := e.st.CreateRun(e.ctx, run("r1", "t1"))
	noErr(t, err)
	runConcurrently(t, 16, func(int) error {
		_, _, err := e.st.UpdateRunAndAppend(e.ctx, "r1", func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
			if r.Status == messages.RunSucceeded {
				return nil, nil
			}
			r.Status = messages.RunSucceeded
			return &messages.LedgerEntry{Kind: messages.KindRunSucceeded}, nil
		})
		return err
	})
	entries, err := e.st.ReadLedger(e.ctx, "r1", 0, 0)
	noErr(t, err)
	equal(t, "terminal entries", len(entries), 1)
}

func testListRunsOrderAndFilter(t *testing.T, e *env) {
	// r0 is oldest; runs alternate tenants; r3 is running.
	for i := range 5 {
		r := run(fmt.Sprintf("r%d", i), []string{"t1", "t2"}[i%2])
		if i == 3 {
			r.Status = messages.RunRunning
		}
		_, _, err := e.st.CreateRun(e.ctx, r)
		noErr(t, err)
		e.clock.Advance(time.Second)
	}
	runID := func(r *messages.SharedRun) string { return r.GetSharedRunId() }
	tests := []struct {
		name string
		f    store.RunFilter
		want []string
	}{
		{"all", store.RunFilter{}, []string{"r4", "r3", "r2", "r1", "r0"}},
		{"tenant", store.RunFilter{TenantID: "t1"}, []string{"r4", "r2", "r0"}},
		{"status", store.RunFilter{Status: messages.RunRunning}, []string{"r3"}},
		{"tenantAndStatus", store.RunFilter{TenantID: "t1", Status: messages.RunQueued}, []string{"r4", "r2", "r0"}},
		{"anyOfStatuses", store.RunFilter{Statuses: []string{messages.RunRunning, messages.RunPaused}}, []string{"r3"}},
		{"anyOfStatusesLimited", store.RunFilter{Statuses: []string{messages.RunRunning, messages.RunQueued}, Limit: 2}, []string{"r4", "r3"}},
		{"statusAndStatuses", store.RunFilter{Status: messages.RunQueued, Statuses: []string{messages.RunRunning}}, []string{}},
		{"limit", store.RunFilter{Limit: 2}, []string{"r4", "r3"}},
		{"limitFiltered", store.RunFilter{TenantID: "t2", Limit: 1}, []string{"r3"}},
		{"none", store.RunFilter{TenantID: "t9"}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.st.ListRuns(e.ctx, tc.f)
			noErr(t, err)
			equalIDs(t, "runs", ids(got, runID), tc.want)
		})
	}
	// A status change made through UpdateRun is visible to the filter.
	_, err := e.st.UpdateRun(e.ctx, "r0", func(r *messages.SharedRun) error {
		r.Status = messages.RunRunning
		return nil
	})
	noErr(t, err)
	got, err := e.st.ListRuns(e.ctx, store.RunFilter{Status: messages.RunRunning})
	noErr(t, err)
	equalIDs(t, "running after update", ids(got, runID), []string{"r3", "r0"})
}

// testScanRunsPages: ScanRuns passes every matching run, in pages of at most the page size,
// more runs than one Redis ZSCAN reply holds; fn may write to the store while the scan goes on
// (it ends the runs it is passed: each is still passed once at least); fn's error ends the scan.
func testScanRunsPages(t *testing.T, e *env) {
	const count, page = 300, 7
	want := map[string]map[string]bool{"live": {}, "t1": {}}
	for i := range count {
		r := run(fmt.Sprintf("r%03d", i), []string{"t1", "t2"}[i%2])
		if i%3 == 0 {
			r.Status = messages.RunRunning
		}
		if i%5 == 0 {
			r.Status = messages.RunSucceeded
		}
		_, _, err := e.st.CreateRun(e.ctx, r)
		noErr(t, err)
		if i%5 != 0 {
			want["live"][r.SharedRunId] = true
		}
		if r.TenantId == "t1" {
			want["t1"][r.SharedRunId] = true
		}
		e.clock.Advance(time.Millisecond)
	}
	scan := func(name string, f store.RunFilter, each func(*messages.SharedRun)) map[string]bool {
		t.Helper()
		seen := map[string]bool{}
		noErr(t, e.st.ScanRuns(e.ctx, f, page, func(runs []*messages.SharedRun) error {
			if len(runs) == 0 || len(runs) > page {
				t.Fatalf("%s: a page of %d runs (page size %d)", name, len(runs), page)
			}
			for _, r := range runs {
				seen[r.SharedRunId] = true
				if each != nil {
					each(r)
				}
			}
			return nil
		}))
		return seen
	}
	live := store.RunFilter{Statuses: []string{messages.RunQueued, messages.RunRunning}}
	sameSet(t, "live runs scanned", scan("live", live, nil), want["live"])
	sameSet(t, "t1's runs scanned", scan("t1", store.RunFilter{TenantID: "t1"}, nil), want["t1"])
	equal(t, "no match", len(scan("none", store.RunFilter{TenantID: "t9"}, nil)), 0)

	// fn ends each run it is passed: every live run is still passed.
	ended := scan("ending", live, func(r *messages.SharedRun) {
		_, err := e.st.UpdateRun(e.ctx, r.SharedRunId, func(x *messages.SharedRun) error {
			x.Status = messages.RunCancelled
			return nil
		})
		noErr(t, err)
	})
	sameSet(t, "live runs scanned while they end", ended, want["live"])
	equal(t, "live runs after they all ended", len(scan("after", live, nil)), 0)

	stop := errors.New("stop")
	calls := 0
	err := e.st.ScanRuns(e.ctx, store.RunFilter{}, page, func([]*messages.SharedRun) error {
		calls++
		return stop
	})
	equal(t, "fn's error", errors.Is(err, stop), true)
	equal(t, "calls after the error", calls, 1)
}

// testScanRunsParked: listing and scanning by status scale_out_requested (every finished
// scale-out request does, from a store's index of parked runs) give exactly the parked runs,
// whichever write parked them, and not those unparked, ended or never parked.
func testScanRunsParked(t *testing.T, e *env) {
	parked := store.RunFilter{Status: messages.RunScaleOutRequested}
	want := map[string]bool{}
	for i := range 40 {
		r := run(fmt.Sprintf("r%02d", i), "t1")
		if i%10 == 0 {
			r.Status = messages.RunScaleOutRequested // created parked
			want[r.SharedRunId] = true
		}
		_, _, err := e.st.CreateRun(e.ctx, r)
		noErr(t, err)
		e.clock.Advance(time.Millisecond)
	}
	set := func(id, status string) {
		t.Helper()
		_, err := e.st.UpdateRun(e.ctx, id, func(r *messages.SharedRun) error { r.Status = status; return nil })
		noErr(t, err)
	}
	for _, id := range []string{"r01", "r02", "r03", "r04", "r05"} {
		set(id, messages.RunScaleOutRequested)
		want[id] = true
	}
	_, _, err := e.st.UpdateRunAndAppend(e.ctx, "r06", func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		r.Status = messages.RunScaleOutRequested
		return &messages.LedgerEntry{Kind: messages.KindScaleOutRequested}, nil
	})
	noErr(t, err)
	want["r06"] = true
	set("r02", messages.RunQueued) // unparked
	set("r03", messages.RunCancelled)
	set("r10", messages.RunQueued)
	delete(want, "r02")
	delete(want, "r03")
	delete(want, "r10")
	set("r02", messages.RunScaleOutRequested) // parked again
	want["r02"] = true

	seen := map[string]bool{}
	noErr(t, e.st.ScanRuns(e.ctx, parked, 3, func(runs []*messages.SharedRun) error {
		for _, r := range runs {
			equal(t, r.SharedRunId+" status", r.Status, messages.RunScaleOutRequested)
			seen[r.SharedRunId] = true
		}
		return nil
	}))
	sameSet(t, "parked runs scanned", seen, want)
	listed, err := e.st.ListRuns(e.ctx, store.RunFilter{Statuses: []string{messages.RunScaleOutRequested}, Limit: 100})
	noErr(t, err)
	seen = map[string]bool{}
	for _, r := range listed {
		seen[r.SharedRunId] = true
	}
	sameSet(t, "parked runs listed", seen, want)
	seen = map[string]bool{}
	noErr(t, e.st.ScanRuns(e.ctx, store.RunFilter{Statuses: []string{messages.RunQueued, messages.RunScaleOutRequested}}, 5,
		func(runs []*messages.SharedRun) error {
			for _, r := range runs {
				seen[r.SharedRunId] = true
			}
			return nil
		}))
	equal(t, "queued and parked runs scanned", len(seen), 40-1) // all but the cancelled r03
}

// sameSet fails t unless got and want hold the same ids.
func sameSet(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	for id := range want {
		if !got[id] {
			t.Fatalf("%s: %s missing (%d of %d passed)", what, id, len(got), len(want))
		}
	}
	for id := range got {
		if !want[id] {
			t.Fatalf("%s: %s does not match", what, id)
		}
	}
}
