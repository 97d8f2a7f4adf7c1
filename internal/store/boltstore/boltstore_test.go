package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/store/storetest"
	"github.com/dairuntime/dair/messages"
)

func open(t testing.TB, path string, now func() time.Time, noSync bool) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(boltstore.Options{Path: path, Now: now, NoSync: noSync})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return st
}

func TestStore_Contract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return open(t, filepath.Join(t.TempDir(), "dair.db"), now, true)
	})
}

func TestStore_Contract_fsync(t *testing.T) {
	if testing.Short() {
		t.Skip("fsync contract run skipped in -short mode")
	}
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return open(t, filepath.Join(t.TempDir(), "dair.db"), now, false)
	})
}

func TestStore_Open_reopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "dair.db")
	st, err := boltstore.Open(boltstore.Options{Path: path})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1", IdempotencyKey: "k"}); err != nil {
		t.Fatalf("create run: %v", err)
	}
	if err := st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1,
		Status: messages.RunRunning, RuntimeInstanceId: "i1"}); err != nil {
		t.Fatalf("create execution: %v", err)
	}
	errs, err := st.CommitSteps(ctx, []store.StepCommit{{ExecutionID: "x1", Epoch: 1,
		Step:   &messages.StepState{StepId: "a", Status: messages.StepSucceeded},
		Ledger: []*messages.LedgerEntry{{Kind: messages.KindStepSucceeded}}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", err, errs)
	}
	if err := st.Enqueue(ctx, "r1"); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := st.Enqueue(ctx, "r2"); !errors.Is(err, boltstore.ErrClosed) {
		t.Fatalf("enqueue after close = %v, want ErrClosed", err)
	}

	st = open(t, path, nil, false)
	tests := []struct {
		name  string
		check func() error
	}{
		{"run", func() error { _, err := st.GetRun(ctx, "r1"); return err }},
		{"idempotency", func() error {
			r, created, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r2", TenantId: "t1", IdempotencyKey: "k"})
			if err == nil && (created || r.GetSharedRunId() != "r1") {
				err = errors.New("idempotency key lost")
			}
			return err
		}},
		{"steps", func() error {
			_, steps, err := st.GetExecution(ctx, "x1")
			if err == nil && len(steps) != 1 {
				err = errors.New("step lost")
			}
			return err
		}},
		{"ledger", func() error {
			l, err := st.ReadLedger(ctx, "r1", 0, 0)
			if err == nil && (len(l) != 1 || l[0].GetSeq() != 1) {
				err = errors.New("ledger lost")
			}
			return err
		}},
		{"index", func() error {
			xs, err := st.ListExecutionsByInstance(ctx, "i1")
			if err == nil && len(xs) != 1 {
				err = errors.New("instance index lost")
			}
			return err
		}},
		{"queue", func() error {
			p, _, err := st.QueueDepth(ctx)
			if err == nil && p != 1 {
				err = errors.New("queue lost")
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStore_Open_locked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dair.db")
	open(t, path, nil, true)
	_, err := boltstore.Open(boltstore.Options{Path: path})
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second open = %v, want ErrLocked", err)
	}
}

func TestStore_Open_emptyPath(t *testing.T) {
	if _, err := boltstore.Open(boltstore.Options{}); err == nil {
		t.Fatal("open with empty path succeeded")
	}
}

func BenchmarkCommitSteps(b *testing.B) {
	storetest.BenchCommit(b, open(b, filepath.Join(b.TempDir(), "dair.db"), nil, false))
}

func BenchmarkCommitSteps_noSync(b *testing.B) {
	storetest.BenchCommit(b, open(b, filepath.Join(b.TempDir(), "dair.db"), nil, true))
}

// TestStore_Open_buildsTheLiveRunsIndex: a database written before the live-runs index
// existed gets it at Open, so listing by an active status still finds every run not ended.
func TestStore_Open_buildsTheLiveRunsIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dair.db")
	st := open(t, path, nil, true)
	for i, status := range []string{messages.RunQueued, messages.RunSucceeded, messages.RunQueued, messages.RunFailed} {
		if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: fmt.Sprintf("r%d", i), TenantId: "t1", Status: status,
			CreatedAt: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// An updated run has a record version stored next to it, which the rebuild skips.
	if _, err := st.UpdateRun(ctx, "r0", func(r *messages.SharedRun) error { r.Attempts++; return nil }); err != nil {
		t.Fatal(err)
	}
	st = editRaw(t, st, path, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("runs_live")) })
	got, err := st.ListRuns(ctx, store.RunFilter{Status: messages.RunQueued})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SharedRunId != "r2" || got[1].SharedRunId != "r0" {
		t.Fatalf("queued runs after the rebuild: %v", got)
	}
}

// TestStore_Open_buildsTheParkedRunsIndex: a database written before the parked-runs index
// existed gets it at Open, so a finished scale-out request still finds every parked run.
func TestStore_Open_buildsTheParkedRunsIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dair.db")
	st := open(t, path, nil, true)
	for i, status := range []string{messages.RunScaleOutRequested, messages.RunQueued, messages.RunScaleOutRequested, messages.RunSucceeded} {
		if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: fmt.Sprintf("r%d", i), TenantId: "t1", Status: status,
			CreatedAt: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	st = editRaw(t, st, path, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("runs_parked")) })
	got, err := st.ListRuns(ctx, store.RunFilter{Status: messages.RunScaleOutRequested})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SharedRunId != "r2" || got[1].SharedRunId != "r0" {
		t.Fatalf("parked runs after the rebuild: %v", got)
	}
}

// closeToRaw closes st and opens its file at path as a bare bbolt database (closed at the end
// of the test unless the test closes it first), to read or change what the store wrote.
func closeToRaw(t *testing.T, st *boltstore.Store, path string) *bolt.DB {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// editRaw closes st, changes its file at path with fn as a bare bbolt database would (a file
// another version wrote), and opens it again; the store returned is closed when t ends.
func editRaw(t *testing.T, st *boltstore.Store, path string, fn func(tx *bolt.Tx) error) *boltstore.Store {
	t.Helper()
	db := closeToRaw(t, st, path)
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(boltstore.Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// BenchmarkExecutionLifecycle measures a run's start and end writes (fsync on), in separate
// calls and in ExecutionLifecycle's two, one at a time and from parallel workers.
func BenchmarkExecutionLifecycle(b *testing.B) {
	for _, mode := range []struct {
		name             string
		separate, serial bool
	}{{"separate/serial", true, true}, {"lifecycle/serial", false, true}, {"separate/parallel", true, false}, {"lifecycle/parallel", false, false}} {
		b.Run(mode.name, func(b *testing.B) {
			storetest.BenchLifecycle(b, open(b, filepath.Join(b.TempDir(), "dair.db"), nil, false), mode.separate, mode.serial)
		})
	}
}

// TestStore_AppendAndCommitSteps: the entries are appended before the commits' entries, in one
// write; a commit refused by its contract (stale epoch) writes nothing of its own and leaves the
// append and the other commits written.
func TestStore_AppendAndCommitSteps(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "dair.db"), time.Now, true)
	ctx := context.Background()
	if err := st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	commit := func(epoch int64, step, kind string) store.StepCommit {
		return store.StepCommit{ExecutionID: "x1", Epoch: epoch, Step: &messages.StepState{StepId: step, Status: messages.StepSucceeded, Attempts: 1},
			Ledger: []*messages.LedgerEntry{{Kind: kind}}}
	}
	commits := []store.StepCommit{commit(2, "a", messages.KindStepSucceeded), commit(1, "b", "stale")}
	stored, errs, err := st.AppendAndCommitSteps(ctx, []*messages.LedgerEntry{{SharedRunId: "r1", Kind: messages.KindDispatch}}, commits)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Seq != 1 {
		t.Fatalf("stored = %v, want the dispatch entry at seq 1", stored)
	}
	if errs[0] != nil || !errors.Is(errs[1], store.ErrStaleEpoch) {
		t.Fatalf("errs = %v, want [nil, stale epoch]", errs)
	}
	if len(commits[0].Appended) != 1 || commits[0].Appended[0].Seq != 2 || commits[1].Appended != nil {
		t.Fatalf("appended = %v / %v", commits[0].Appended, commits[1].Appended)
	}
	entries, err := st.ReadLedger(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(len(entries), entries[0].Kind, entries[1].Kind); got != fmt.Sprint(2, messages.KindDispatch, messages.KindStepSucceeded) {
		t.Fatalf("ledger = %v", entries)
	}
	_, steps, err := st.GetExecution(ctx, "x1")
	if err != nil || len(steps) != 1 || steps[0].StepId != "a" {
		t.Fatalf("steps = %v, %v: want step a only (the stale commit writes nothing)", steps, err)
	}
}

// TestStore_Append_seqPerRunWhenIDsSharePrefixes: a run's next Seq comes from its own last
// ledger key, also when other runs' ids extend its id or sort just before or after it.
func TestStore_Append_seqPerRunWhenIDsSharePrefixes(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "dair.db"), time.Now, true)
	ctx := context.Background()
	var got []string
	for _, run := range []string{"r10", "r1", "r10", "r", "r1", "r2", "r1", "r10"} {
		out, err := st.Append(ctx, &messages.LedgerEntry{SharedRunId: run, Kind: messages.KindDispatch})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d", run, out[0].Seq))
	}
	want := "[r10:1 r1:1 r10:2 r:1 r1:2 r2:1 r1:3 r10:3]"
	if fmt.Sprint(got) != want {
		t.Fatalf("seqs = %v, want %s", got, want)
	}
}

// TestStore_runVersion_ofAnOlderFile: a record version that a file written before 2026-12 keeps
// in its runs_ver bucket is read, and the next update stores its successor next to the run.
func TestStore_runVersion_ofAnOlderFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dair.db")
	st := open(t, path, nil, true)
	if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1", Status: messages.RunQueued}); err != nil {
		t.Fatal(err)
	}
	st = editRaw(t, st, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("runs_ver")).Put([]byte("r1"), []byte{0, 0, 0, 0, 0, 0, 0, 5})
	})
	if _, ver, err := st.GetRunVersion(ctx, "r1"); err != nil || ver != 5 {
		t.Fatalf("version = %d, %v; want the older file's 5", ver, err)
	}
	if _, err := st.UpdateRun(ctx, "r1", func(r *messages.SharedRun) error { r.Attempts++; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ver, err := st.GetRunVersion(ctx, "r1"); err != nil || ver != 6 {
		t.Fatalf("version after an update = %d, %v; want 6", ver, err)
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs = %v, %v; want r1 alone (no version key listed)", runs, err)
	}
	if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1\x00v", TenantId: "t1"}); err == nil {
		t.Fatal("a run id with NUL was stored")
	}
}
