package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// TestCommitter_stopAnswersEverySubmittedRequest: requests still buffered when the committer
// stops are written (or answered with an error), never left without an answer: a caller
// waiting on one would otherwise block until its deadline (the pump of a stopping node did).
func TestCommitter_stopAnswersEverySubmittedRequest(t *testing.T) {
	st := openStore(t)
	c := ledger.NewCommitter(st, ledger.CommitterConfig{Shards: 2, Batch: 8})
	const n = 2000
	var answered atomic.Int64
	for i := range n {
		run := fmt.Sprintf("r%d", i%50)
		ok := c.Submit(ledger.Request{Run: run, Ledger: []*messages.LedgerEntry{{SharedRunId: run, Kind: messages.KindAdmission}},
			Done: func(error) { answered.Add(1) }})
		if !ok {
			t.Fatalf("submit %d refused before stop", i)
		}
	}
	g := workgroup.New()
	c.Start(g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("stop did not return: %v", err)
	}
	if got := answered.Load(); got != n {
		t.Fatalf("%d of %d submitted requests were answered", got, n)
	}
	if c.Submit(ledger.Request{Run: "late", Ledger: []*messages.LedgerEntry{{SharedRunId: "late"}}, Done: func(error) {}}) {
		t.Fatal("submit accepted after stop")
	}
}

// TestWriter_Record_ordersEntriesPerRun: entries recorded through the committer land in the
// run's ledger in the order they were recorded; without a running committer they go direct.
func TestWriter_Record_ordersEntriesPerRun(t *testing.T) {
	st := openStore(t)
	g := workgroup.New()
	c := ledger.NewCommitter(st, ledger.CommitterConfig{})
	c.Start(g)
	w := ledger.NewWriter(st, ledger.WriterConfig{Committer: c})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.Record(ctx, &messages.LedgerEntry{SharedRunId: "r1", Kind: messages.KindSubmitted},
		&messages.LedgerEntry{SharedRunId: "r1", Kind: messages.KindAdmission})
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	w.Record(ctx, &messages.LedgerEntry{SharedRunId: "r1", Kind: messages.KindDispatch}) // committer stopped: direct
	entries, err := st.ReadLedger(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	want := fmt.Sprint([]string{messages.KindSubmitted, messages.KindAdmission, messages.KindDispatch})
	if fmt.Sprint(kinds) != want {
		t.Fatalf("ledger kinds = %v, want %v", kinds, want)
	}
}
