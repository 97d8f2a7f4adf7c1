package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// An execution is a hash: pb (the message), ver (CAS version), and the fields scripts need
// without decoding protobuf: epoch, owner, inst, upd (UpdatedAt), term ('1' when terminal) and
// run (SharedRunId). The hash fields win over the same fields in pb when reading. Step states
// live in a second hash (step id -> pb), their statuses in a third (step id -> status).
func (s *Store) execKey(id string) string        { return s.k("exec", id) }
func (s *Store) execStepsKey(id string) string   { return s.k("exec", id, "steps") }
func (s *Store) execStatusKey(id string) string  { return s.k("exec", id, "status") }
func (s *Store) execMeteredKey(id string) string { return s.k("exec", id, "metered") }
func (s *Store) execIndexPrefix() string         { return s.k("execidx", "") }
func (s *Store) execIndexKey(inst string) string { return s.k("execidx", inst) }
func (s *Store) ledgerPrefix() string            { return s.k("ledger", "") }

// terminalExec reports whether an execution status is final.
func terminalExec(status string) string {
	if messages.IsTerminalRun(status) {
		return "1"
	}
	return "0"
}

// newExecutionRecord returns a copy of e with its timestamps set (now where zero), and its pb.
func newExecutionRecord(e *messages.Execution, now int64) (*messages.Execution, []byte, error) {
	x := proto.Clone(e).(*messages.Execution)
	if x.CreatedAt == 0 {
		x.CreatedAt = now
	}
	if x.UpdatedAt == 0 {
		x.UpdatedAt = now
	}
	pb, err := marshal("execution", x)
	return x, pb, err
}

// CreateExecution stores a new execution or returns store.ErrExists.
func (s *Store) CreateExecution(ctx context.Context, e *messages.Execution) error {
	id := e.GetExecutionId()
	if id == "" {
		return fmt.Errorf("redisstore: create execution: empty execution_id")
	}
	x, pb, err := newExecutionRecord(e, s.now().UnixNano())
	if err != nil {
		return err
	}
	res, err := s.runScript(ctx, "create execution "+id, scriptCreateExecution,
		[]string{s.execKey(id), s.execIndexKey(x.RuntimeInstanceId)},
		pb, x.Epoch, x.Owner, x.RuntimeInstanceId, x.UpdatedAt, terminalExec(x.Status), x.SharedRunId, id)
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("redisstore: create execution %s: %w", id, store.ErrExists)
	}
	return nil
}

// execFields are the hash fields read with an execution, in HMGET order.
var execFields = []string{"pb", "ver", "epoch", "owner", "inst", "upd"}

// decodeExec merges an HMGET reply over execFields into a message and returns its version.
func decodeExec(id string, vals []any) (*messages.Execution, string, error) {
	var str [6]string
	for i := range str {
		v, ok := asString(vals[i])
		if !ok {
			return nil, "", fmt.Errorf("redisstore: execution %s: %w", id, store.ErrNotFound)
		}
		str[i] = v
	}
	x := &messages.Execution{}
	if err := unmarshal("execution", []byte(str[0]), x); err != nil {
		return nil, "", err
	}
	epoch, err := strconv.ParseInt(str[2], 10, 64)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: execution %s: bad epoch %q: %w", id, str[2], err)
	}
	upd, err := strconv.ParseInt(str[5], 10, 64)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: execution %s: bad updated_at %q: %w", id, str[5], err)
	}
	x.Epoch, x.Owner, x.RuntimeInstanceId, x.UpdatedAt = epoch, str[3], str[4], upd
	return x, str[1], nil
}

// loadExec reads one execution and its version.
func (s *Store) loadExec(ctx context.Context, id string) (*messages.Execution, string, error) {
	a := make([]any, 0, 2+len(execFields))
	a = append(a, "hmget", s.execKey(id))
	for _, f := range execFields {
		a = append(a, f)
	}
	cmd := redis.NewSliceCmd(ctx, a...)
	if err := s.batch.do(ctx, cmd); err != nil {
		return nil, "", fmt.Errorf("redisstore: get execution %s: %w", id, err)
	}
	return decodeExec(id, cmd.Val())
}

// GetExecution returns the execution and its step states ordered by step id.
func (s *Store) GetExecution(ctx context.Context, id string) (*messages.Execution, []*messages.StepState, error) {
	if err := s.check(); err != nil {
		return nil, nil, fmt.Errorf("redisstore: get execution %s: %w", id, err)
	}
	pipe := s.rdb.Pipeline()
	ex := pipe.HMGet(ctx, s.execKey(id), execFields...)
	st := pipe.HGetAll(ctx, s.execStepsKey(id))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("redisstore: get execution %s: %w", id, err)
	}
	x, _, err := decodeExec(id, ex.Val())
	if err != nil {
		return nil, nil, err
	}
	steps := make([]*messages.StepState, 0, len(st.Val()))
	for _, b := range st.Val() {
		ss := &messages.StepState{}
		if err := unmarshal("step state", []byte(b), ss); err != nil {
			return nil, nil, err
		}
		steps = append(steps, ss)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].StepId < steps[j].StepId })
	return x, steps, nil
}

// AcquireExecution increments the epoch and takes ownership in one script.
func (s *Store) AcquireExecution(ctx context.Context, id, owner, runtimeInstanceID string) (int64, error) {
	res, err := s.runScript(ctx, "acquire execution "+id, scriptAcquireExecution,
		[]string{s.execKey(id)}, owner, runtimeInstanceID, s.now().UnixNano(), s.execIndexPrefix(), id)
	if err != nil {
		return 0, err
	}
	n, _ := res.(int64)
	if n < 0 {
		return 0, fmt.Errorf("redisstore: acquire execution %s: %w", id, store.ErrNotFound)
	}
	return n, nil
}

// FenceExecution bumps the epoch of id while it belongs to fromInstance or to no instance.
func (s *Store) FenceExecution(ctx context.Context, id, owner, fromInstance string) (int64, bool, error) {
	res, err := s.runScript(ctx, "fence execution "+id, scriptFenceExecution,
		[]string{s.execKey(id)}, owner, fromInstance, s.now().UnixNano(), s.execIndexPrefix(), id)
	if err != nil {
		return 0, false, err
	}
	out, ok := res.([]any)
	if !ok || len(out) != 2 {
		return 0, false, fmt.Errorf("redisstore: fence execution %s: unexpected reply %v", id, res)
	}
	code, _ := out[0].(int64)
	epoch, _ := out[1].(int64)
	if code < 0 {
		return 0, false, fmt.Errorf("redisstore: fence execution %s: %w", id, store.ErrNotFound)
	}
	return epoch, code == 1, nil
}

// stepStateEpochField is the field number of messages.StepState's epoch.
const stepStateEpochField = 8

// commitArgs builds the keys and arguments of one scriptCommit call, and the entries it
// stores (copies of c.Ledger with At and ExecutionId set; Seq and an empty SharedRunId are the
// script's to fill).
func (s *Store) commitArgs(c store.StepCommit) ([]string, []any, []*messages.LedgerEntry, error) {
	if c.Step == nil || c.Step.StepId == "" {
		return nil, nil, nil, fmt.Errorf("redisstore: commit %s: missing step or step id", c.ExecutionID)
	}
	st := c.Step
	pb, err := marshal("step state", st)
	if err != nil {
		return nil, nil, nil, err
	}
	if st.Epoch != c.Epoch {
		// The commit's epoch, as the step's last epoch field (a parser keeps a field's last
		// value): the encoding of a copy with it set, without the copy (proto.Clone was 2% of
		// a run's CPU).
		pb = protowire.AppendVarint(protowire.AppendTag(pb, stepStateEpochField, protowire.VarintType), uint64(c.Epoch))
	}
	now := s.now().UnixNano()
	mark, upb, tenant, err := usageArgs(c, now)
	if err != nil {
		return nil, nil, nil, err
	}
	args := make([]any, 0, 8+2*len(c.Ledger))
	args = append(args, c.Epoch, st.GetStepId(), pb, st.GetStatus(), s.ledgerPrefix(), mark, upb, tenant)
	stored := make([]*messages.LedgerEntry, len(c.Ledger))
	for i, le := range c.Ledger {
		e := proto.Clone(le).(*messages.LedgerEntry)
		e.Seq = 0 // the entry's position in its ledger list is its Seq
		if e.At == 0 {
			e.At = now
		}
		if e.ExecutionId == "" {
			e.ExecutionId = c.ExecutionID
		}
		b, err := marshal("ledger entry", e)
		if err != nil {
			return nil, nil, nil, err
		}
		args = append(args, e.SharedRunId, b)
		stored[i] = e
	}
	keys := []string{s.execKey(c.ExecutionID), s.execStepsKey(c.ExecutionID), s.execStatusKey(c.ExecutionID),
		s.execMeteredKey(c.ExecutionID), s.usageKey(tenant), s.usageTenants()}
	return keys, args, stored, nil
}

// usageArgs returns the usage arguments of scriptCommit: the event's mark in the execution's
// metered hash (step id / attempt; empty when the commit carries no usage), its pb and tenant.
func usageArgs(c store.StepCommit, now int64) (mark string, pb []byte, tenant string, err error) {
	if c.Usage == nil {
		return "", []byte{}, "", nil
	}
	u := proto.Clone(c.Usage).(*messages.UsageEvent)
	if u.At == 0 {
		u.At = now
	}
	if pb, err = marshal("usage event", u); err != nil {
		return "", nil, "", err
	}
	return store.UsageMark(c), pb, u.TenantId, nil
}

// CommitSteps sends one EVALSHA of the commit script per commit in a single pipeline (evalEach:
// commits that hit NOSCRIPT, Redis restarted, are sent again once the script is reloaded). A
// commit with a Finish runs scriptCommitFinish, which ends the execution in the same script.
func (s *Store) CommitSteps(ctx context.Context, commits []store.StepCommit) ([]error, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: commit steps: %w", err)
	}
	for i, c := range commits {
		if f := c.Finish; f != nil && (c.Finished == nil || f.RunID == "" || f.Entry == nil || !messages.IsTerminalRun(f.Status)) {
			return nil, fmt.Errorf("redisstore: commit steps: commit %d: a finish needs Finished, a run id, an entry and a final status (%q)", i, f.Status)
		}
	}
	errs := make([]error, len(commits))
	stored := make([][]*messages.LedgerEntry, len(commits))
	finishEntries := make([]*messages.LedgerEntry, len(commits))
	todo := make([]int, 0, len(commits))
	ks, as := make([][]string, 0, len(commits)), make([][]any, 0, len(commits))
	for i, c := range commits {
		k, a, st, err := s.commitArgs(c)
		if err == nil && c.Finish != nil {
			f := *c.Finish
			f.ExecutionID, f.Epoch = c.ExecutionID, c.Epoch
			var fk []string
			var fa []any
			fk, fa, finishEntries[i], err = s.finishArgs(f)
			k = append(k, fk...)
			a = append(append(append(make([]any, 0, 1+len(a)+len(fa)), len(a)), a...), fa...)
		}
		if err != nil {
			errs[i] = err
			if c.Finish != nil {
				*c.Finished = store.FinishOutcome{Err: err}
			}
			continue
		}
		stored[i] = st
		ks, as = append(ks, k), append(as, a)
		todo = append(todo, i)
	}
	res, rerrs, err := s.evalEach(ctx, "commit steps", func(j int) *redis.Script {
		if commits[todo[j]].Finish != nil {
			return scriptCommitFinish
		}
		return scriptCommit
	}, ks, as)
	if err != nil {
		return nil, err
	}
	for j, i := range todo {
		c := commits[i]
		if rerrs[j] != nil {
			errs[i] = fmt.Errorf("commit %s/%s: %w", c.ExecutionID, c.Step.GetStepId(), rerrs[j])
			if c.Finish != nil {
				*c.Finished = store.FinishOutcome{Err: errs[i]}
			}
			continue
		}
		if c.Finish == nil {
			commits[i].Appended, errs[i] = commitResult(c, res[j], stored[i])
			continue
		}
		out, _ := res[j].([]any)
		if len(out) < 1 || len(out) > 2 {
			errs[i] = fmt.Errorf("redisstore: commit %s/%s: unexpected reply %v", c.ExecutionID, c.Step.GetStepId(), res[j])
			*c.Finished = store.FinishOutcome{Err: errs[i]}
			continue
		}
		commits[i].Appended, errs[i] = commitResult(c, out[0], stored[i])
		if len(out) == 1 {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("redisstore: commit %s/%s: unexpected reply %v", c.ExecutionID, c.Step.GetStepId(), res[j])
			}
			*c.Finished = store.FinishOutcome{Err: errs[i]}
			continue
		}
		f := *c.Finish
		f.ExecutionID, f.Epoch = c.ExecutionID, c.Epoch
		r, ferr := finishResult("finish execution "+c.ExecutionID, f, out[1], finishEntries[i])
		*c.Finished = store.FinishOutcome{Result: r, Err: ferr}
	}
	return errs, nil
}

var _ store.CommitFinisher = (*Store)(nil)

// FinishesCommits reports that CommitSteps writes a commit's Finish in the commit's script.
func (s *Store) FinishesCommits() bool { return true }

// isRedisReplyError reports whether err is an error reply from the server about this command
// (a script error) rather than a transport failure or a server that is still loading.
func isRedisReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "LOADING")
}

// commitResult maps a scriptCommit reply to the per-commit error and, for a written commit,
// its stored ledger entries: stored (from commitArgs) given the reply's run and Seqs.
func commitResult(c store.StepCommit, res any, stored []*messages.LedgerEntry) ([]*messages.LedgerEntry, error) {
	if out, ok := res.([]any); ok && len(out) == 2+len(stored) {
		run, _ := out[1].(string)
		for i, e := range stored {
			seq, ok := out[2+i].(int64)
			if !ok {
				return nil, fmt.Errorf("redisstore: commit %s/%s: unexpected reply %v", c.ExecutionID, c.Step.GetStepId(), res)
			}
			if e.SharedRunId == "" {
				e.SharedRunId = run
			}
			e.Seq = seq
		}
		return stored, nil
	}
	n, ok := res.(int64)
	if !ok {
		return nil, fmt.Errorf("redisstore: commit %s/%s: unexpected reply %v", c.ExecutionID, c.Step.GetStepId(), res)
	}
	var sentinel error
	switch n {
	case commitNotFound:
		sentinel = store.ErrNotFound
	case commitStale:
		sentinel = store.ErrStaleEpoch
	case commitDone:
		sentinel = store.ErrAlreadyCommitted
	default:
		return nil, fmt.Errorf("redisstore: commit %s/%s: unexpected reply %d", c.ExecutionID, c.Step.GetStepId(), n)
	}
	return nil, fmt.Errorf("redisstore: commit %s/%s: %w", c.ExecutionID, c.Step.GetStepId(), sentinel)
}

// UpdateExecution applies fn if epoch is current, with an optimistic compare-and-set loop that
// also re-checks the epoch. fn cannot change the epoch.
func (s *Store) UpdateExecution(ctx context.Context, id string, epoch int64, fn func(*messages.Execution) error) (*messages.Execution, error) {
	op := "update execution " + id
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	for range maxCASAttempts {
		x, ver, err := s.loadExec(ctx, id)
		if err != nil {
			return nil, err
		}
		if x.Epoch != epoch {
			return nil, fmt.Errorf("redisstore: %s at epoch %d (current %d): %w", op, epoch, x.Epoch, store.ErrStaleEpoch)
		}
		if err := fn(x); err != nil {
			return nil, err
		}
		x.Epoch = epoch
		x.UpdatedAt = s.now().UnixNano()
		pb, err := marshal("execution", x)
		if err != nil {
			return nil, err
		}
		res, err := s.runScript(ctx, op, scriptUpdateExecution, []string{s.execKey(id)},
			ver, epoch, pb, x.Owner, x.RuntimeInstanceId, x.UpdatedAt, terminalExec(x.Status), s.execIndexPrefix(), id)
		if err != nil {
			return nil, err
		}
		switch n, _ := res.(int64); n {
		case casOK:
			return x, nil
		case casMissing:
			return nil, fmt.Errorf("redisstore: %s: %w", op, store.ErrNotFound)
		case casStale:
			return nil, fmt.Errorf("redisstore: %s at epoch %d: %w", op, epoch, store.ErrStaleEpoch)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("redisstore: %s: %w", op, err)
		}
	}
	return nil, fmt.Errorf("redisstore: %s: %w", op, ErrConflict)
}

// ListExecutionsByInstance returns the non-terminal executions on runtimeInstanceID by id.
func (s *Store) ListExecutionsByInstance(ctx context.Context, runtimeInstanceID string) ([]*messages.Execution, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list executions of %s: %w", runtimeInstanceID, err)
	}
	ids, err := s.rdb.SMembers(ctx, s.execIndexKey(runtimeInstanceID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list executions of %s: %w", runtimeInstanceID, err)
	}
	sort.Strings(ids)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.execKey(id), execFields...)
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: list executions of %s: %w", runtimeInstanceID, err)
		}
	}
	out := make([]*messages.Execution, 0, len(ids))
	for i, id := range ids {
		x, _, err := decodeExec(id, cmds[i].Val())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if x.RuntimeInstanceId != runtimeInstanceID || messages.IsTerminalRun(x.Status) {
			continue
		}
		out = append(out, x)
	}
	return out, nil
}

// CommitOne runs the step-commit script for one commit in one round trip, without a pipeline:
// the store's ceiling for one durable commit, which BenchmarkRawLuaCommit measures. It returns
// the same errors as one element of CommitSteps.
func (s *Store) CommitOne(ctx context.Context, c store.StepCommit) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: commit: %w", err)
	}
	keys, args, stored, err := s.commitArgs(c)
	if err != nil {
		return err
	}
	res, err := scriptCommit.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		return fmt.Errorf("redisstore: commit %s/%s: %w", c.ExecutionID, c.Step.GetStepId(), err)
	}
	_, err = commitResult(c, res, stored)
	return err
}
