package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// deferRig opens a store at path whose deferrable writes wait up to hold, with the writer's
// hooks set until t ends: it returns the store, a channel signalled when the writer begins to
// hold, and a function returning the sizes of the groups committed so far.
func deferRig(t *testing.T, path string, hold time.Duration) (*Store, <-chan struct{}, func() []int) {
	t.Helper()
	holding := make(chan struct{}, 1)
	var (
		mu     sync.Mutex // guards groups
		groups []int
	)
	testHookHold = func() {
		select {
		case holding <- struct{}{}:
		default:
		}
	}
	testHookCommit = func(n int) {
		mu.Lock()
		groups = append(groups, n)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookHold, testHookCommit = nil, nil })
	s, err := Open(Options{Path: path, NoSync: true, DeferHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, holding, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(groups)
	}
}

// putHeld puts instance id from a goroutine and waits until the writer holds it; the returned
// channel answers the put's error.
func putHeld(ctx context.Context, t *testing.T, s *Store, holding <-chan struct{}, id string) <-chan error {
	t.Helper()
	put := make(chan error, 1)
	go func() {
		put <- s.PutInstance(ctx, &messages.CapacityDescriptor{RuntimeInstanceId: id}, time.Minute)
	}()
	select {
	case <-holding:
	case err := <-put:
		t.Fatalf("the descriptor was written without waiting for company (err %v)", err)
	case <-ctx.Done():
		t.Fatal("the descriptor's write was not held")
	}
	return put
}

func TestStore_deferredWriteSharesTheNextUrgentOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, holding, groups := deferRig(t, filepath.Join(t.TempDir(), "dair.db"), time.Minute)
	put := putHeld(ctx, t, s, holding, "i1")
	if err := s.PutTenant(ctx, &messages.TenantSettings{TenantId: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if got := groups(); !slices.Equal(got, []int{2}) {
		t.Fatalf("committed groups = %v, want one transaction of both writes [2]", got)
	}
	if _, err := s.GetInstance(ctx, "i1"); err != nil {
		t.Fatalf("the deferred descriptor: %v", err)
	}
}

func TestStore_deferredWriteAloneCommitsAfterTheHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, groups := deferRig(t, filepath.Join(t.TempDir(), "dair.db"), time.Millisecond)
	if err := s.PutInstance(ctx, &messages.CapacityDescriptor{RuntimeInstanceId: "i1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetInstance(ctx, "i1"); err != nil {
		t.Fatalf("the deferred descriptor: %v", err)
	}
	if got := groups(); !slices.Equal(got, []int{1}) {
		t.Fatalf("committed groups = %v, want [1]", got)
	}
}

func TestStore_closeCommitsAHeldWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "dair.db")
	s, holding, _ := deferRig(t, path, time.Hour)
	put := putHeld(ctx, t, s, holding, "i1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-put; err != nil {
		t.Fatalf("a write held when the store closed: %v", err)
	}
	again, err := Open(Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.GetInstance(ctx, "i1"); err != nil {
		t.Fatalf("the descriptor held at close, after reopening: %v", err)
	}
}

// TestStore_queuedStartSharesTheCommitsAfterIt: a start queued with QueueStartExecution waits
// for the step commit queued after it and both go in one transaction, the start first; a start
// that is refused (the run moved) takes the commits queued after it down with it.
func TestStore_queuedStartSharesTheCommitsAfterIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		assigned string // the run's instance: "i1" is the execution's
	}{{"started", "i1"}, {"refused", "i2"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, holding, groups := deferRig(t, filepath.Join(t.TempDir(), "dair.db"), time.Minute)
			if _, _, err := s.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1", Status: messages.RunDispatched,
				AssignedRuntimeInstanceId: tc.assigned, CreatedAt: 1}); err != nil {
				t.Fatal(err)
			}
			before := len(groups())
			wait, err := s.QueueStartExecution(ctx, store.ExecutionStart{
				Execution: &messages.Execution{ExecutionId: "x1", SharedRunId: "r1", RuntimeInstanceId: "i1", Epoch: 1, Status: messages.RunRunning},
				Entry:     &messages.LedgerEntry{Kind: messages.KindExecutionStarted}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-holding:
			case <-ctx.Done():
				t.Fatal("the queued start was not held")
			}
			errs, err := s.CommitSteps(ctx, []store.StepCommit{{ExecutionID: "x1", Epoch: 1,
				Step:   &messages.StepState{StepId: "a", Status: messages.StepSucceeded, Attempts: 1},
				Ledger: []*messages.LedgerEntry{{Kind: messages.KindStepSucceeded, StepId: "a"}}}})
			if err != nil {
				t.Fatal(err)
			}
			res, startErr := wait()
			if again, err := wait(); again != res || !errors.Is(err, startErr) {
				t.Fatalf("second wait = %+v, %v; first %+v, %v", again, err, res, startErr)
			}
			if tc.assigned == "i1" {
				if startErr != nil || !res.Created || errs[0] != nil {
					t.Fatalf("start = %+v, %v; commit %v", res, startErr, errs[0])
				}
				if g := groups()[before:]; !slices.Equal(g, []int{2}) {
					t.Fatalf("groups committed = %v, want one of the start and the commit", g)
				}
				return
			}
			if !errors.Is(startErr, store.ErrRunMoved) || !errors.Is(errs[0], store.ErrNotFound) {
				t.Fatalf("start = %v, commit = %v: want the run moved, and the execution not found", startErr, errs[0])
			}
			if _, _, err := s.GetExecution(ctx, "x1"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("GetExecution after a refused start = %v", err)
			}
		})
	}
}
