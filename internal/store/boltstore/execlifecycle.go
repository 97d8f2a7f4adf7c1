package boltstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var _ store.ExecutionLifecycle = (*Store)(nil)

var _ store.QueuedStarter = (*Store)(nil)

// StartExecution creates the execution and marks its run running in one write transaction.
// See store.ExecutionLifecycle.
func (s *Store) StartExecution(ctx context.Context, st store.ExecutionStart) (store.StartResult, error) {
	req, res, err := s.startRequest(st)
	if err == nil {
		err = s.write(ctx, req)
	}
	return startAnswer(st, res, err)
}

// QueueStartExecution hands StartExecution's write to the writer goroutine, deferrable (it
// waits up to the defer hold for the step commits queued after it), and returns once the
// writer took it. See store.QueuedStarter.
func (s *Store) QueueStartExecution(ctx context.Context, st store.ExecutionStart) (func() (store.StartResult, error), error) {
	req, res, err := s.startRequest(st)
	if err != nil {
		return nil, err
	}
	req.deferrable = true
	if err := s.queue(ctx, req); err != nil {
		return nil, err
	}
	return sync.OnceValues(func() (store.StartResult, error) { return startAnswer(st, res, <-req.done) }), nil
}

// startAnswer is StartExecution's answer once its write returned err.
func startAnswer(st store.ExecutionStart, res *store.StartResult, err error) (store.StartResult, error) {
	if err != nil {
		return store.StartResult{}, wrap("start execution", st.Execution.GetExecutionId(), err)
	}
	return *res, nil
}

// startRequest is the write of StartExecution; res is its result once written.
func (s *Store) startRequest(st store.ExecutionStart) (writeReq, *store.StartResult, error) {
	if err := checkStart(st); err != nil {
		return writeReq{}, nil, err
	}
	res := &store.StartResult{}
	return writeReq{done: make(chan error, 1), fn: func(tx *bolt.Tx) error {
		var err error
		*res, err = startTx(tx, s.nowNanos(), st)
		return err
	}}, res, nil
}

// checkStart refuses a start that names no execution, run or entry.
func checkStart(st store.ExecutionStart) error {
	if st.Execution.GetExecutionId() == "" || st.Execution.GetSharedRunId() == "" || st.Entry == nil {
		return errors.New("boltstore: start execution: empty execution or run id, or no entry")
	}
	return nil
}

// startTx is StartExecution inside tx.
func startTx(tx *bolt.Tx, now int64, st store.ExecutionStart) (store.StartResult, error) {
	x := st.Execution
	id, runID := x.GetExecutionId(), x.GetSharedRunId()
	var res store.StartResult
	r := &messages.SharedRun{}
	if err := getFound(tx, bRuns, []byte(runID), r); err != nil {
		return res, err
	}
	old := &messages.Execution{}
	existed, err := get(tx, bExecutions, []byte(id), old)
	if err != nil {
		return res, err
	}
	if existed && old.GetEpoch() != x.GetEpoch() {
		return res, fmt.Errorf("epoch %d (current %d): %w", x.GetEpoch(), old.GetEpoch(), store.ErrStaleEpoch)
	}
	mark, err := store.StartCheck(r, id, x.GetRuntimeInstanceId(), x.GetLocalRunId())
	if err != nil {
		return res, err
	}
	if !existed {
		nx := proto.Clone(x).(*messages.Execution)
		nx.CreatedAt, nx.UpdatedAt = cmp.Or(nx.CreatedAt, now), cmp.Or(nx.UpdatedAt, now)
		if err := putExecution(tx, nil, nx); err != nil {
			return res, err
		}
		res.Created = true
	}
	if !mark {
		return res, nil
	}
	store.MarkStarted(r, id, x.GetRuntimeInstanceId(), x.GetLocalRunId())
	res.Entry, err = writeRun(tx, now, r, st.Entry, nil)
	return res, err
}

// FinishExecution ends the execution, its run and the run's hold in one write transaction.
// See store.ExecutionLifecycle.
func (s *Store) FinishExecution(ctx context.Context, f store.ExecutionFinish) (store.FinishResult, error) {
	if f.ExecutionID == "" || f.RunID == "" || f.Entry == nil || !messages.IsTerminalRun(f.Status) {
		return store.FinishResult{}, fmt.Errorf("boltstore: finish execution %s: empty execution or run id, no entry or status %q not final",
			f.ExecutionID, f.Status)
	}
	var res store.FinishResult
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var refused, err error
		res, refused, err = finishTx(tx, s.nowNanos(), f)
		return cmp.Or(refused, err)
	})
	if err != nil {
		return store.FinishResult{}, wrap("finish execution", f.ExecutionID, err)
	}
	return res, nil
}

// FinishesCommits reports that CommitSteps writes a commit's Finish in the commit's
// transaction. See store.CommitFinisher.
func (s *Store) FinishesCommits() bool { return true }

var _ store.CommitFinisher = (*Store)(nil)

// finishTx is FinishExecution inside tx. A contract refusal (stale epoch, missing execution or
// run) comes back as refused with nothing written; err is a storage failure.
func finishTx(tx *bolt.Tx, now int64, f store.ExecutionFinish) (res store.FinishResult, refused, err error) {
	old, err := loadExecution(tx, "finish execution", f.ExecutionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return res, err, nil
		}
		return res, nil, err
	}
	if old.GetEpoch() != f.Epoch {
		return res, fmt.Errorf("epoch %d (current %d): %w", f.Epoch, old.GetEpoch(), store.ErrStaleEpoch), nil
	}
	r := &messages.SharedRun{}
	if err := getFound(tx, bRuns, []byte(f.RunID), r); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return res, err, nil
		}
		return res, nil, err
	}
	x := proto.Clone(old).(*messages.Execution)
	x.Status, x.Output, x.FailureReason, x.UpdatedAt = f.Status, f.Output, f.FailureReason, now
	if err := putExecution(tx, old, x); err != nil {
		return res, nil, err
	}
	if !messages.IsTerminalRun(r.Status) && (r.ExecutionId == "" || r.ExecutionId == f.ExecutionID) {
		r.Status, r.Output, r.FailureReason = f.Status, f.Output, f.FailureReason
		if res.Entry, err = writeRun(tx, now, r, f.Entry, f.Usage); err != nil {
			return store.FinishResult{}, nil, err
		}
		res.Changed = true
	}
	if f.InstanceID == "" {
		return res, nil, nil
	}
	return res, nil, releaseHold(tx, f.InstanceID, f.RunID)
}

// writeRun stores r (changed by the caller from its stored record, with the same creation
// time) with UpdatedAt now, keeps the live-runs index and the run's version, appends a copy of
// entry and stores usage (when not nil). It returns the appended copy.
func writeRun(tx *bolt.Tx, now int64, r *messages.SharedRun, entry *messages.LedgerEntry, usage *messages.UsageEvent) (*messages.LedgerEntry, error) {
	id := r.SharedRunId
	r.UpdatedAt = now
	if err := put(tx, bRuns, []byte(id), r); err != nil {
		return nil, err
	}
	if err := indexLive(tx, createdKey(r), r); err != nil {
		return nil, err
	}
	if err := bumpRunVersion(tx, id); err != nil {
		return nil, err
	}
	appended := proto.Clone(entry).(*messages.LedgerEntry)
	appended.SharedRunId = id
	if err := appendEntry(tx, now, appended); err != nil {
		return nil, err
	}
	if usage != nil {
		if err := putUsage(tx, now, usage); err != nil {
			return nil, err
		}
	}
	return appended, nil
}
