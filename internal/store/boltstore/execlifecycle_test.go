package boltstore_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// TestStore_ExecutionLifecycle_keepsIndexes: FinishExecution takes the run out of the
// live-runs index and the execution out of its instance's index. (Readers filter stale entries
// by status, so the contract suite cannot see them; recovery's scans would pay for them.)
func TestStore_ExecutionLifecycle_keepsIndexes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dair.db")
	st, err := boltstore.Open(boltstore.Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1", Status: messages.RunDispatched,
		AssignedRuntimeInstanceId: "i1", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartExecution(ctx, store.ExecutionStart{
		Execution: &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", RuntimeInstanceId: "i1", Epoch: 1, Status: messages.RunRunning},
		Entry:     &messages.LedgerEntry{Kind: messages.KindExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishExecution(ctx, store.ExecutionFinish{ExecutionID: "x1", Epoch: 1, RunID: "r1", Status: messages.RunSucceeded,
		Entry: &messages.LedgerEntry{Kind: messages.KindRunSucceeded}, InstanceID: "i1"}); err != nil {
		t.Fatal(err)
	}
	db := closeToRaw(t, st, path)
	err = db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte("runs_live")).ForEach(func(k, _ []byte) error {
			if bytes.HasSuffix(k, []byte("r1")) {
				t.Errorf("r1 still in runs_live")
			}
			return nil
		}); err != nil {
			return err
		}
		if tx.Bucket([]byte("exec_by_inst")).Get([]byte("i1\x00x1")) != nil {
			t.Errorf("x1 still in exec_by_inst")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
