package actors

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// TestCommitter_closeAnswersEverySubmittedRequest: requests still buffered when the committer
// closes are written (or answered with an error), never left without an answer: a caller
// waiting on one would otherwise block until its deadline (the pump of a stopping node did).
func TestCommitter_closeAnswersEverySubmittedRequest(t *testing.T) {
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := newCommitter(st, zap.NewNop(), nil, 2, 8)
	const n = 2000
	var answered atomic.Int64
	for i := range n {
		run := fmt.Sprintf("r%d", i%50)
		ok := c.submit(commitReq{run: run, ledger: []*messages.LedgerEntry{{SharedRunId: run, Kind: messages.KindAdmission}},
			done: func(error) { answered.Add(1) }})
		if !ok {
			t.Fatalf("submit %d refused before close", i)
		}
	}
	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("close did not return")
	}
	if got := answered.Load(); got != n {
		t.Fatalf("%d of %d submitted requests were answered", got, n)
	}
}
