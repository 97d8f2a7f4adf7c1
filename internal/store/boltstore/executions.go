package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// isTerminalExecution reports whether an execution status leaves the by-instance index.
func isTerminalExecution(status string) bool { return messages.IsTerminalRun(status) }

// instIndexKey is the exec_by_inst key of x, or nil when x is not indexed.
func instIndexKey(x *messages.Execution) []byte {
	if x == nil || isTerminalExecution(x.GetStatus()) {
		return nil
	}
	return key(x.GetRuntimeInstanceId(), x.GetExecutionId())
}

// putExecution stores x and moves its by-instance index entry from old's.
func putExecution(tx *bolt.Tx, old, x *messages.Execution) error {
	id := x.GetExecutionId()
	if err := put(tx, bExecutions, []byte(id), x); err != nil {
		return err
	}
	oldKey, newKey := instIndexKey(old), instIndexKey(x)
	if bytes.Equal(oldKey, newKey) {
		return nil
	}
	idx := tx.Bucket(bExecByInst)
	if oldKey != nil {
		if err := idx.Delete(oldKey); err != nil {
			return fmt.Errorf("unindex execution %s: %w", id, err)
		}
	}
	if newKey != nil {
		if err := idx.Put(newKey, nil); err != nil {
			return fmt.Errorf("index execution %s: %w", id, err)
		}
	}
	return nil
}

// loadExecution returns the execution or an ErrNotFound error.
func loadExecution(tx *bolt.Tx, op, id string) (*messages.Execution, error) {
	x := &messages.Execution{}
	ok, err := get(tx, bExecutions, []byte(id), x)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("boltstore: %s %s: %w", op, id, store.ErrNotFound)
	}
	return x, nil
}

// CreateExecution stores e or returns store.ErrExists. CreatedAt/UpdatedAt default to now.
func (s *Store) CreateExecution(ctx context.Context, e *messages.Execution) error {
	id := e.GetExecutionId()
	if id == "" {
		return errors.New("boltstore: create execution: empty id")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bExecutions).Get([]byte(id)) != nil {
			return fmt.Errorf("boltstore: create execution %s: %w", id, store.ErrExists)
		}
		x := proto.Clone(e).(*messages.Execution)
		now := s.nowNanos()
		if x.CreatedAt == 0 {
			x.CreatedAt = now
		}
		if x.UpdatedAt == 0 {
			x.UpdatedAt = now
		}
		return putExecution(tx, nil, x)
	})
	return wrap("create execution", id, err)
}

// GetExecution returns the execution and its steps ordered by step id.
func (s *Store) GetExecution(ctx context.Context, id string) (*messages.Execution, []*messages.StepState, error) {
	var x *messages.Execution
	steps := []*messages.StepState{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		if x, err = loadExecution(tx, "get execution", id); err != nil {
			return err
		}
		pre := prefix(id)
		c := tx.Bucket(bSteps).Cursor()
		for k, v := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre); k, v = c.Next() {
			st := &messages.StepState{}
			if err := proto.Unmarshal(v, st); err != nil {
				return fmt.Errorf("decode step %s: %w", k[len(pre):], err)
			}
			steps = append(steps, st)
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("get execution", id, err)
	}
	return x, steps, nil
}

// AcquireExecution bumps the epoch and sets owner and runtime instance.
func (s *Store) AcquireExecution(ctx context.Context, id, owner, runtimeInstanceID string) (int64, error) {
	var epoch int64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old, err := loadExecution(tx, "acquire execution", id)
		if err != nil {
			return err
		}
		x := proto.Clone(old).(*messages.Execution)
		x.Epoch++
		x.Owner = owner
		x.RuntimeInstanceId = runtimeInstanceID
		x.UpdatedAt = s.nowNanos()
		epoch = x.Epoch
		return putExecution(tx, old, x)
	})
	if err != nil {
		return 0, wrap("acquire execution", id, err)
	}
	return epoch, nil
}

// FenceExecution bumps the epoch of id while it belongs to fromInstance or to no instance.
func (s *Store) FenceExecution(ctx context.Context, id, owner, fromInstance string) (int64, bool, error) {
	var (
		epoch  int64
		fenced bool
	)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old, err := loadExecution(tx, "fence execution", id)
		if err != nil {
			return err
		}
		epoch, fenced = old.Epoch, false
		if inst := old.RuntimeInstanceId; inst != "" && inst != fromInstance {
			return nil
		}
		x := proto.Clone(old).(*messages.Execution)
		x.Epoch++
		x.Owner, x.RuntimeInstanceId = owner, ""
		x.UpdatedAt = s.nowNanos()
		epoch, fenced = x.Epoch, true
		return putExecution(tx, old, x)
	})
	if err != nil {
		return 0, false, wrap("fence execution", id, err)
	}
	return epoch, fenced, nil
}

// CommitSteps writes every commit in one write transaction (shared with concurrent writers).
// errs[i] reports commit i; a commit that fails writes nothing.
func (s *Store) CommitSteps(ctx context.Context, commits []store.StepCommit) ([]error, error) {
	_, errs, err := s.AppendAndCommitSteps(ctx, nil, commits)
	if err != nil {
		return nil, err
	}
	return errs, nil
}

var _ store.AppendCommitter = (*Store)(nil)

// AppendAndCommitSteps appends entries and then commits commits, in one transaction: the
// ledger append and the commit batch that follows it in a committer's round cost one fsync.
func (s *Store) AppendAndCommitSteps(ctx context.Context, entries []*messages.LedgerEntry, commits []store.StepCommit) ([]*messages.LedgerEntry, []error, error) {
	var finished []store.FinishOutcome
	for i, c := range commits {
		if c.Step.GetStepId() == "" {
			return nil, nil, fmt.Errorf("boltstore: commit steps: commit %d has no step id", i)
		}
		if f := c.Finish; f != nil {
			if c.Finished == nil || f.RunID == "" || f.Entry == nil || !messages.IsTerminalRun(f.Status) {
				return nil, nil, fmt.Errorf("boltstore: commit steps: commit %d: a finish needs Finished, a run id, an entry and a final status (%q)", i, f.Status)
			}
			finished = make([]store.FinishOutcome, len(commits))
		}
	}
	stored := make([]*messages.LedgerEntry, len(entries))
	errs := make([]error, len(commits))
	appended := make([][]*messages.LedgerEntry, len(commits))
	err := s.update(ctx, func(tx *bolt.Tx) error {
		now := s.nowNanos()
		if err := appendEntries(tx, now, entries, stored); err != nil {
			return err
		}
		for i, c := range commits {
			res, entries, err := commitStep(tx, now, c)
			if err != nil {
				return err
			}
			errs[i], appended[i] = res, entries
			if c.Finish != nil {
				if finished[i], err = finishCommitted(tx, now, c, res); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		what := "commit steps"
		if len(entries) > 0 {
			what = "append and commit steps"
		}
		return nil, nil, wrap(what, "", err)
	}
	for i := range commits {
		commits[i].Appended = appended[i]
		if commits[i].Finish != nil {
			*commits[i].Finished = finished[i]
		}
	}
	return stored, errs, nil
}

// finishCommitted writes c's Finish after its commit answered res: only when the commit was
// written or its step had already succeeded (otherwise the outcome is the commit's refusal).
func finishCommitted(tx *bolt.Tx, now int64, c store.StepCommit, res error) (store.FinishOutcome, error) {
	if res != nil && !errors.Is(res, store.ErrAlreadyCommitted) {
		return store.FinishOutcome{Err: res}, nil
	}
	f := *c.Finish
	f.ExecutionID, f.Epoch = c.ExecutionID, c.Epoch
	result, refused, err := finishTx(tx, now, f)
	return store.FinishOutcome{Result: result, Err: refused}, err
}

// commitStep applies one commit. It returns the commit's contract error as res (nothing
// written), a storage failure as err, and the stored ledger entries of a written commit.
func commitStep(tx *bolt.Tx, now int64, c store.StepCommit) (res error, appended []*messages.LedgerEntry, err error) {
	stepID := c.Step.GetStepId()
	x := &messages.Execution{}
	ok, err := get(tx, bExecutions, []byte(c.ExecutionID), x)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return fmt.Errorf("boltstore: commit %s/%s: %w", c.ExecutionID, stepID, store.ErrNotFound), nil, nil
	}
	if x.GetEpoch() != c.Epoch {
		return fmt.Errorf("boltstore: commit %s/%s epoch %d (current %d): %w", c.ExecutionID, stepID,
			c.Epoch, x.GetEpoch(), store.ErrStaleEpoch), nil, nil
	}
	k := key(c.ExecutionID, stepID)
	prev := &messages.StepState{}
	ok, err = get(tx, bSteps, k, prev)
	if err != nil {
		return nil, nil, err
	}
	if ok && prev.GetStatus() == messages.StepSucceeded {
		return fmt.Errorf("boltstore: commit %s/%s: %w", c.ExecutionID, stepID, store.ErrAlreadyCommitted), nil, nil
	}
	st := proto.Clone(c.Step).(*messages.StepState)
	st.Epoch = c.Epoch
	if err := put(tx, bSteps, k, st); err != nil {
		return nil, nil, err
	}
	appended = make([]*messages.LedgerEntry, 0, len(c.Ledger))
	for _, e := range c.Ledger {
		en := proto.Clone(e).(*messages.LedgerEntry)
		if en.SharedRunId == "" {
			en.SharedRunId = x.GetSharedRunId()
		}
		if err := appendEntry(tx, now, en); err != nil {
			return nil, nil, err
		}
		appended = append(appended, en)
	}
	return nil, appended, meterCommit(tx, now, c)
}

// UpdateExecution applies fn if epoch is current. The id and epoch cannot be changed by fn.
func (s *Store) UpdateExecution(ctx context.Context, id string, epoch int64, fn func(*messages.Execution) error) (*messages.Execution, error) {
	var out *messages.Execution
	var fnErr error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out, fnErr = nil, nil
		old, err := loadExecution(tx, "update execution", id)
		if err != nil {
			return err
		}
		if old.GetEpoch() != epoch {
			return fmt.Errorf("boltstore: update execution %s epoch %d (current %d): %w", id, epoch,
				old.GetEpoch(), store.ErrStaleEpoch)
		}
		x := proto.Clone(old).(*messages.Execution)
		if err := fn(x); err != nil {
			fnErr = err
			return err
		}
		x.ExecutionId, x.Epoch, x.UpdatedAt = id, epoch, s.nowNanos()
		if err := putExecution(tx, old, x); err != nil {
			return err
		}
		out = x
		return nil
	})
	if fnErr != nil && err == fnErr {
		return nil, err
	}
	if err != nil {
		return nil, wrap("update execution", id, err)
	}
	return out, nil
}

// ListExecutionsByInstance returns the non-terminal executions of runtimeInstanceID by id.
func (s *Store) ListExecutionsByInstance(ctx context.Context, runtimeInstanceID string) ([]*messages.Execution, error) {
	out := []*messages.Execution{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		pre := prefix(runtimeInstanceID)
		c := tx.Bucket(bExecByInst).Cursor()
		for k, _ := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre); k, _ = c.Next() {
			x := &messages.Execution{}
			ok, err := get(tx, bExecutions, k[len(pre):], x)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, x)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list executions", runtimeInstanceID, err)
	}
	return out, nil
}
