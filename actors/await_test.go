package actors

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/testsupport"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

func awaitStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// A run that ends without this process's hub hearing of it (it ended on another node) wakes
// its waiters through the batched read; a run still running does not.
func TestRunWatch_wakesWaitersOfRunsThatEndedElsewhere(t *testing.T) {
	ctx := context.Background()
	st := awaitStore(t)
	g := workgroup.New()
	defer func() { _ = g.Stop(ctx) }()
	w := newRunWatch(st, g, zap.NewNop())
	for _, id := range []string{"ends", "runs"} {
		if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: id, TenantId: "t", Status: messages.RunRunning}); err != nil {
			t.Fatal(err)
		}
	}
	ends, stopEnds := w.watch("ends")
	defer stopEnds()
	runs, stopRuns := w.watch("runs")
	defer stopRuns()
	if _, err := st.UpdateRun(ctx, "ends", func(r *messages.SharedRun) error { r.Status = messages.RunSucceeded; return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ends:
	case <-time.After(10 * awaitPoll):
		t.Fatal("the waiter of a run that ended was not woken")
	}
	select {
	case <-runs:
		t.Fatal("the waiter of a running run was woken")
	default:
	}
}

// The read loop runs only while someone waits.
func TestRunWatch_loopEndsWhenNobodyWaits(t *testing.T) {
	ctx := context.Background()
	g := workgroup.New()
	defer func() { _ = g.Stop(ctx) }()
	w := newRunWatch(awaitStore(t), g, zap.NewNop())
	_, stop := w.watch("r1")
	if g.Running() != 1 {
		t.Fatalf("running goroutines with a waiter = %d, want 1", g.Running())
	}
	stop()
	testsupport.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return g.Running() == 0 },
		"the read loop outlived its last waiter")
	_, stop = w.watch("r2") // a new waiter starts a new loop
	defer stop()
	if g.Running() != 1 {
		t.Fatalf("running goroutines with a new waiter = %d, want 1", g.Running())
	}
}
