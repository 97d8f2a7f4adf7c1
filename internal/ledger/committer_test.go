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
	kinds := ledgerKinds(ctx, t, st, "r1")
	want := fmt.Sprint([]string{messages.KindSubmitted, messages.KindAdmission, messages.KindDispatch})
	if fmt.Sprint(kinds) != want {
		t.Fatalf("ledger kinds = %v, want %v", kinds, want)
	}
}

// countingStore counts CommitSteps calls and the commits they carry.
type countingStore struct {
	store.Store
	calls, commits atomic.Int64
}

func (s *countingStore) CommitSteps(ctx context.Context, commits []store.StepCommit) ([]error, error) {
	s.calls.Add(1)
	s.commits.Add(int64(len(commits)))
	return s.Store.CommitSteps(ctx, commits)
}

// stepRecordOf is the commit of step id of execution x1 (run r1) in status.
func stepRecordOf(id, status, kind string) store.StepCommit {
	sc := stepRecord(status, kind)
	sc.Step.StepId, sc.Ledger[0].StepId = id, id
	return sc
}

// stepRecord is the commit of step a of execution x1 (run r1) in status.
func stepRecord(status, kind string) store.StepCommit {
	return store.StepCommit{ExecutionID: "x1", Epoch: 1, Step: &messages.StepState{StepId: "a", Status: status, Attempts: 1},
		Ledger: []*messages.LedgerEntry{{SharedRunId: "r1", Kind: kind}}}
}

// TestCommitter_heldRecordsWaitForWhatFollows: a record nothing waits on and that is alone in
// its batch waits (StartHold) for what follows, and all of it goes in one store call: a step's
// "running" record for the step's end (both in one write), a pure step's success
// (Request.Async, its dependents already run) for the next step's records. A record whose
// follower does not come is written when the hold is over.
func TestCommitter_heldRecordsWaitForWhatFollows(t *testing.T) {
	start := func(step string) ledger.Request {
		return ledger.Request{Commit: stepRecordOf(step, messages.StepRunning, messages.KindStepStarted)}
	}
	end := func(step string, async bool) ledger.Request {
		return ledger.Request{Commit: stepRecordOf(step, messages.StepSucceeded, messages.KindStepSucceeded), Async: async}
	}
	for _, tc := range []struct {
		name    string
		hold    time.Duration
		first   ledger.Request
		follow  []ledger.Request
		commits int64    // commits written (a start folds into its end)
		kinds   []string // the run's ledger
	}{
		{"fast step", time.Minute, start("a"), []ledger.Request{end("a", false)}, 1,
			[]string{messages.KindStepStarted, messages.KindStepSucceeded}},
		{"slow step", time.Millisecond, start("a"), nil, 1, []string{messages.KindStepStarted}},
		{"pure step, then the next", time.Minute, end("a", true), []ledger.Request{start("b"), end("b", false)}, 2,
			[]string{messages.KindStepSucceeded, messages.KindStepStarted, messages.KindStepSucceeded}},
		{"pure step alone", time.Millisecond, end("a", true), nil, 1, []string{messages.KindStepSucceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &countingStore{Store: openStore(t)}
			ctx, holding, g, done, submit := holdRig(t, st, ledger.CommitterConfig{StartHold: tc.hold})
			submit(tc.first)
			select {
			case <-holding: // held: what follows comes after, as a fast step's end does
			case <-ctx.Done():
				t.Fatal("the first record was not held")
			}
			for _, r := range tc.follow {
				submit(r)
			}
			awaitAnswers(ctx, t, done, 1+len(tc.follow))
			if err := g.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if n := st.calls.Load(); n != 1 {
				t.Fatalf("%d CommitSteps calls, want 1", n)
			}
			if n := st.commits.Load(); n != tc.commits {
				t.Fatalf("%d commits written, want %d", n, tc.commits)
			}
			if kinds := ledgerKinds(ctx, t, st, "r1"); fmt.Sprint(kinds) != fmt.Sprint(tc.kinds) {
				t.Fatalf("ledger kinds = %v, want %v", kinds, tc.kinds)
			}
		})
	}
}

// TestCommitter_foldKeepsTheRunsOrder: a step's start folds into its end also when other
// records of the run came between them (parallel steps): the folded write takes the end's
// place, so each start is written just before its own end and the run's finish, riding on the
// last record, stays last.
func TestCommitter_foldKeepsTheRunsOrder(t *testing.T) {
	st := &countingStore{Store: openStore(t)}
	ctx, holding, g, done, submit := holdRig(t, st, ledger.CommitterConfig{StartHold: time.Minute})
	if _, _, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", Status: messages.RunRunning, ExecutionId: "x1"}); err != nil {
		t.Fatal(err)
	}
	record := stepRecordOf
	submit(ledger.Request{Run: "r1", Commit: record("b", messages.StepRunning, messages.KindStepStarted)})
	select {
	case <-holding:
	case <-ctx.Done():
		t.Fatal("the start was not held")
	}
	submit(ledger.Request{Run: "r1", Commit: record("c", messages.StepRunning, messages.KindStepStarted)})
	submit(ledger.Request{Run: "r1", Commit: record("c", messages.StepSucceeded, messages.KindStepSucceeded), Async: true})
	last := record("b", messages.StepSucceeded, messages.KindStepSucceeded)
	last.Finish = &store.ExecutionFinish{ExecutionID: "x1", Epoch: 1, RunID: "r1", Status: messages.RunSucceeded,
		Entry: &messages.LedgerEntry{SharedRunId: "r1", Kind: messages.KindRunSucceeded}}
	last.Finished = &store.FinishOutcome{}
	submit(ledger.Request{Run: "r1", Commit: last})
	awaitAnswers(ctx, t, done, 4)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if calls, commits := st.calls.Load(), st.commits.Load(); calls != 1 || commits != 2 {
		t.Fatalf("%d CommitSteps calls of %d commits, want 1 of 2 (both starts folded)", calls, commits)
	}
	entries, err := st.ReadLedger(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.StepId+" "+e.Kind)
	}
	want := []string{"c step_started", "c step_succeeded", "b step_started", "b step_succeeded", " " + messages.KindRunSucceeded}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
}

// boltCounting is a bolt store that counts its ledger and commit calls by kind.
type boltCounting struct {
	*boltstore.Store
	appends, commits, combined atomic.Int64
}

func (s *boltCounting) Append(ctx context.Context, entries ...*messages.LedgerEntry) ([]*messages.LedgerEntry, error) {
	s.appends.Add(1)
	return s.Store.Append(ctx, entries...)
}

func (s *boltCounting) CommitSteps(ctx context.Context, commits []store.StepCommit) ([]error, error) {
	s.commits.Add(1)
	return s.Store.CommitSteps(ctx, commits)
}

func (s *boltCounting) AppendAndCommitSteps(ctx context.Context, entries []*messages.LedgerEntry, commits []store.StepCommit) ([]*messages.LedgerEntry, []error, error) {
	s.combined.Add(1)
	return s.Store.AppendAndCommitSteps(ctx, entries, commits)
}

// TestCommitter_asyncAppendSharesTheStepsWrite: an append nothing waits for (a dispatch's
// outcome) waits like a start for the step records that follow it, and all of them go in one
// store call, in order; an append its caller waits for is written at once, alone.
func TestCommitter_asyncAppendSharesTheStepsWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ledger.CommitterConfig
		async bool
		kinds []string
		calls [3]int64 // Append, CommitSteps, AppendAndCommitSteps
	}{
		{"async append", ledger.CommitterConfig{StartHold: time.Minute}, true,
			[]string{messages.KindDispatch, messages.KindStepStarted, messages.KindStepSucceeded}, [3]int64{0, 0, 1}},
		// An execution's start takes a store write between its dispatch's outcome and its first
		// step's records: the async append waits past the (short) start hold for them.
		{"async append held past the start hold", ledger.CommitterConfig{StartHold: time.Nanosecond, AsyncHold: time.Minute}, true,
			[]string{messages.KindDispatch, messages.KindStepStarted, messages.KindStepSucceeded}, [3]int64{0, 0, 1}},
		{"waited-on append", ledger.CommitterConfig{StartHold: time.Minute}, false, []string{messages.KindDispatch}, [3]int64{1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer bs.Close()
			st := &boltCounting{Store: bs}
			ctx, holding, g, done, submit := holdRig(t, st, tc.cfg)
			submit(ledger.Request{Ledger: []*messages.LedgerEntry{{SharedRunId: "r1", Kind: messages.KindDispatch}}, Async: tc.async})
			want := 1
			if tc.async {
				select {
				case <-holding:
				case <-ctx.Done():
					t.Fatal("the async append was not held")
				}
				submit(ledger.Request{Commit: stepRecord(messages.StepRunning, messages.KindStepStarted)})
				submit(ledger.Request{Commit: stepRecord(messages.StepSucceeded, messages.KindStepSucceeded)})
				want = 3
			}
			awaitAnswers(ctx, t, done, want)
			if err := g.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if got := [3]int64{st.appends.Load(), st.commits.Load(), st.combined.Load()}; got != tc.calls {
				t.Fatalf("store calls (Append, CommitSteps, AppendAndCommitSteps) = %v, want %v", got, tc.calls)
			}
			if kinds := ledgerKinds(ctx, t, st, "r1"); fmt.Sprint(kinds) != fmt.Sprint(tc.kinds) {
				t.Fatalf("ledger kinds = %v, want %v", kinds, tc.kinds)
			}
		})
	}
}

// holdSignal sets the committer's hold hook until t ends (call it before the committer starts)
// and returns the channel it signals each time a loop begins to hold a batch.
func holdSignal(t *testing.T) <-chan struct{} {
	holding := make(chan struct{}, 1)
	t.Cleanup(ledger.SetHoldHook(func() {
		select {
		case holding <- struct{}{}:
		default:
		}
	}))
	return holding
}

// awaitAnswers waits for n answers on done and fails t on an error, or when ctx ends first (a
// request left unanswered, or held when it should not be).
func awaitAnswers(ctx context.Context, t *testing.T, done <-chan error, n int) {
	t.Helper()
	for i := range n {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d requests not answered", n-i, n)
		}
	}
}

// rigStore is what holdRig's committer writes to.
type rigStore interface {
	ledger.CommitStore
	CreateExecution(ctx context.Context, e *messages.Execution) error
}

// holdRig starts a one-shard committer over st (holding execution x1 of run r1) configured by
// cfg (its Shards set to 1), and returns a context bounding the test, the hold signal (holdSignal), the
// committer's group, the answers channel and submit, which hands in a request of run r1 whose
// answer goes to done.
func holdRig(t *testing.T, st rigStore, cfg ledger.CommitterConfig) (context.Context, <-chan struct{}, *workgroup.Group, chan error, func(ledger.Request)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := st.CreateExecution(ctx, &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	holding := holdSignal(t)
	g := workgroup.New()
	cfg.Shards = 1
	c := ledger.NewCommitter(st, cfg)
	c.Start(g)
	done := make(chan error, 8)
	submit := func(r ledger.Request) {
		r.Run, r.Done = "r1", func(err error) { done <- err }
		if !c.Submit(r) {
			t.Fatal("submit refused")
		}
	}
	return ctx, holding, g, done, submit
}

// ledgerKinds is the kinds of run's ledger entries, in order.
func ledgerKinds(ctx context.Context, t *testing.T, st interface {
	ReadLedger(ctx context.Context, run string, after int64, limit int) ([]*messages.LedgerEntry, error)
}, run string) []string {
	t.Helper()
	entries, err := st.ReadLedger(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, 0, len(entries))
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}
