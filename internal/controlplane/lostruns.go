package controlplane

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// RunPlace is where a run an instance holds stands for recovery.
type RunPlace int

// The places of PlaceRun.
const (
	// RunUnassigned: the run names no instance; recovery leaves it to the queue repairs.
	RunUnassigned RunPlace = iota
	// RunOnLost: its instance is not live (expired, dropped, or its member was lost): the run
	// is fenced and requeued.
	RunOnLost
	// RunOnLive: its instance is live; recovery only checks that the instance still has it.
	RunOnLive
)

// String returns the place's name.
func (p RunPlace) String() string {
	switch p {
	case RunOnLost:
		return "on-lost-instance"
	case RunOnLive:
		return "on-live-instance"
	}
	return "unassigned"
}

// PlaceRun tells where an active run stands given the live instances. It is pure.
func PlaceRun(run *messages.SharedRun, live map[string]bool) RunPlace {
	switch inst := run.GetAssignedRuntimeInstanceId(); {
	case inst == "":
		return RunUnassigned
	case !live[inst]:
		return RunOnLost
	}
	return RunOnLive
}

// TakeForRecovery reports whether the current record x of a run that a recovery listed (as
// listed) on a lost instance goes back to the queue, and marks it as a recovery when it does:
// only while x is still assigned to that instance, active (dispatched, running or paused) and
// unchanged since the listing (its UpdatedAt). A run that moved meanwhile (an overlapping
// recovery requeued it; a new activation took it, even on an instance that reuses the lost
// one's id; it finished) is left alone; the next round judges it afresh. It is pure apart from
// the mark.
func TakeForRecovery(x, listed *messages.SharedRun) bool {
	if x.AssignedRuntimeInstanceId != listed.AssignedRuntimeInstanceId || !isActive(x.Status) || x.UpdatedAt != listed.UpdatedAt {
		return false
	}
	x.Recovery = true
	return true
}

// isActive reports whether a run of status is held by an instance.
func isActive(status string) bool {
	return status == messages.RunDispatched || status == messages.RunRunning || status == messages.RunPaused
}

// memberRecoveryTTL is how long the first control plane to recover a lost member keeps the
// member's recovery to itself: the others skip it (the periodic rounds still catch what it
// missed).
const memberRecoveryTTL = time.Minute

// memberRecoveryLease names the lease that makes one control plane recover a lost member's
// runs at once.
func memberRecoveryLease(member string) string { return "recover/" + member }

// recoverMember requeues at once the runs of every instance that is not live (the lost
// member's among them), whoever holds the recovery lease: the first control plane to take the
// member's recovery lease does it, so a loss waits neither for the periodic round nor for the
// lease holder's own verdict. It does nothing when another control plane took it first.
func (r *Recoverer) recoverMember(ctx context.Context, member string) error {
	ok, err := r.st.AcquireLease(ctx, memberRecoveryLease(member), r.cfg.Incarnation, memberRecoveryTTL)
	if err != nil || !ok {
		return err
	}
	start := time.Now()
	lost := 0
	err = r.eachActivePage(ctx, func(onLost, _ []*messages.SharedRun) error {
		lost += len(onLost)
		r.recoverLost(ctx, onLost, "runtime-instance-lost")
		return nil
	})
	r.cfg.Log.Debug("member recovery", zap.String("member", member), zap.Int("lost", lost), zap.Duration("took", time.Since(start)))
	return err
}

// activePage is how many active runs recovery reads and judges at a time: a round goes
// through every active run, however many, holding a page of them.
const activePage = 1000

// eachActivePage goes through the active runs (dispatched, running, paused) a page at a time
// (store.ScanRuns): it reads the live instances after each page and calls fn with the page's
// runs split by PlaceRun, on an instance that is not live and on a live one. The registry is
// read after the runs, so a run assigned to an instance that registered meanwhile (a new
// instance reusing a lost one's id, say) is seen with its instance live.
func (r *Recoverer) eachActivePage(ctx context.Context, fn func(lost, held []*messages.SharedRun) error) error {
	err := r.st.ScanRuns(ctx, store.RunFilter{Statuses: activeStatuses}, activePage, func(runs []*messages.SharedRun) error {
		live, err := r.liveInstances(ctx)
		if err != nil {
			return err
		}
		var lost, held []*messages.SharedRun
		for _, run := range runs {
			switch PlaceRun(run, live) {
			case RunOnLost:
				lost = append(lost, run)
			case RunOnLive:
				held = append(held, run)
			}
		}
		return fn(lost, held)
	})
	if err != nil {
		return fmt.Errorf("active runs: %w", err)
	}
	return nil
}

// recoverLost fences and requeues runs found on lost instances, skipping those another call
// of this recoverer is moving now: in batches when the store can (store.Recovery), one run at
// a time otherwise. Failures are logged.
func (r *Recoverer) recoverLost(ctx context.Context, runs []*messages.SharedRun, reason string) {
	runs, done := r.claimInflight(runs)
	defer done()
	rec, ok := r.st.(store.Recovery)
	if !ok {
		workgroup.Each(runs, roundParallelism, func(run *messages.SharedRun) {
			if err := r.RecoverRun(ctx, run, reason); err != nil {
				r.cfg.Log.Warn("recover run", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
			}
		})
		return
	}
	sem := make(chan struct{}, recoveryBatchParallelism)
	var wg sync.WaitGroup
	for len(runs) > 0 {
		n := min(len(runs), recoveryBatch)
		batch := runs[:n]
		runs = runs[n:]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r.requeueBatch(ctx, rec, batch, reason)
		}()
	}
	wg.Wait()
}

// recoveryBatch is how many runs one store.Recovery call moves, and recoveryBatchParallelism
// how many such calls run at once.
const (
	recoveryBatch            = 64
	recoveryBatchParallelism = 4
)

// requeueBatch moves one batch of runs through rec and logs what it did.
func (r *Recoverer) requeueBatch(ctx context.Context, rec store.Recovery, runs []*messages.SharedRun, reason string) {
	batch := make([]store.Requeue, len(runs))
	for i, run := range runs {
		batch[i] = store.Requeue{RunID: run.SharedRunId, ExecutionID: run.ExecutionId, From: run.AssignedRuntimeInstanceId,
			Owner: "recovery:" + r.cfg.Incarnation, Take: func(x *messages.SharedRun) bool { return TakeForRecovery(x, run) },
			Entry: func(epoch int64) *messages.LedgerEntry { return recoveryEntry(run, epoch, reason) }}
	}
	res, err := rec.RequeueRuns(ctx, batch)
	if err != nil {
		r.cfg.Log.Warn("recover runs", zap.Int("runs", len(runs)), zap.Error(err))
		return
	}
	moved := 0
	for i, run := range runs {
		switch out := res[i]; {
		case out.Err != nil:
			r.cfg.Log.Warn("recover run", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(out.Err))
		case out.Moved:
			moved++
			r.requeued(run, out.Epoch)
			if n, ok := r.cfg.Ledger.(Notifier); ok {
				n.Notify(run.SharedRunId, false) // the store wrote the entry, not the Ledger
			}
		}
	}
	if moved > 0 && r.cfg.OnRequeued != nil {
		r.cfg.OnRequeued()
	}
}

// recoveryEntry is the ledger record of run's requeue off its lost instance at the fence's
// epoch.
func recoveryEntry(run *messages.SharedRun, epoch int64, reason string) *messages.LedgerEntry {
	lost := run.AssignedRuntimeInstanceId
	return &messages.LedgerEntry{Kind: messages.KindRecovery, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		RuntimeInstanceId: lost, Epoch: epoch, TenantId: run.GetSnapshot().GetTenantId(), Reason: reason,
		Data: jsonOrNil(map[string]any{"lost_runtime_instance_id": lost, "fenced_epoch": epoch})}
}

// requeued logs a run requeued for recovery.
func (r *Recoverer) requeued(run *messages.SharedRun, epoch int64) {
	r.cfg.Log.Info("run requeued for recovery", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId),
		zap.String("execution_id", run.ExecutionId), zap.String("lost_runtime_instance_id", run.AssignedRuntimeInstanceId), zap.Int64("epoch", epoch))
}

// Notifier is an optional capability of a Ledger: Notify tells local waiters that a run's
// ledger changed through a write the Ledger did not make (a batched recovery). It does not
// block. *ledger.Writer implements it.
type Notifier interface {
	Notify(runID string, terminal bool)
}

// claimInflight returns the runs of runs no other call of this recoverer is recovering now,
// marked as being recovered until done is called.
func (r *Recoverer) claimInflight(runs []*messages.SharedRun) (mine []*messages.SharedRun, done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range runs {
		if !r.inflight[run.SharedRunId] {
			r.inflight[run.SharedRunId] = true
			mine = append(mine, run)
		}
	}
	return mine, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, run := range mine {
			delete(r.inflight, run.SharedRunId)
		}
	}
}
