package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var _ store.Recovery = (*Store)(nil)

// requeueTimeout bounds the writes of RequeueRuns that follow its fences, which outlive the
// caller's context: a fenced run must not be left off the queue because its caller gave up.
const requeueTimeout = 10 * time.Second

// RequeueRuns fences and requeues a batch of runs in four pipelined round trips (fences, run
// reads, conditional run writes with their entries, hold releases with enqueues), whatever its
// size; a run whose record changed between its read and its write is retried on its own. See
// store.Recovery.
func (s *Store) RequeueRuns(ctx context.Context, batch []store.Requeue) ([]store.RequeueResult, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: requeue runs: %w", err)
	}
	out := make([]store.RequeueResult, len(batch))
	if err := s.fenceBatch(ctx, batch, out); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requeueTimeout)
	defer cancel()
	tenants, err := s.requeueBatch(ctx, batch, out)
	if err != nil {
		return nil, err
	}
	if err := s.enqueueBatch(ctx, batch, out, tenants); err != nil {
		return nil, err
	}
	return out, nil
}

// fenceBatch fences the execution of every run of batch and records each outcome in out.
func (s *Store) fenceBatch(ctx context.Context, batch []store.Requeue, out []store.RequeueResult) error {
	var idx []int
	var keys [][]string
	var args [][]any
	now := s.now().UnixNano()
	for i, rq := range batch {
		out[i].Fenced = true
		if rq.ExecutionID == "" {
			continue
		}
		idx = append(idx, i)
		keys = append(keys, []string{s.execKey(rq.ExecutionID)})
		args = append(args, []any{rq.Owner, rq.From, now, s.execIndexPrefix(), rq.ExecutionID})
	}
	res, errs, err := s.evalMany(ctx, "fence executions", scriptFenceExecution, keys, args)
	if err != nil {
		return err
	}
	for j, i := range idx {
		reply, ok := res[j].([]any)
		switch {
		case errs[j] != nil:
			out[i].Fenced, out[i].Err = false, errs[j]
		case !ok || len(reply) != 2:
			out[i].Fenced, out[i].Err = false, fmt.Errorf("redisstore: fence execution %s: unexpected reply %v", batch[i].ExecutionID, res[j])
		default:
			code, _ := reply[0].(int64)
			epoch, _ := reply[1].(int64)
			if code >= 0 { // a missing execution fences nothing, at epoch 0
				out[i].Epoch, out[i].Fenced = epoch, code == 1
			}
		}
	}
	return nil
}

// requeueBatch marks queued, with their entries, the fenced runs their Take accepts, and
// returns the tenant of each run it moved (by batch index).
func (s *Store) requeueBatch(ctx context.Context, batch []store.Requeue, out []store.RequeueResult) (map[int]string, error) {
	var idx []int
	for i := range batch {
		if out[i].Fenced && out[i].Err == nil {
			idx = append(idx, i)
		}
	}
	pipe := s.rdb.Pipeline()
	reads := make([]*redis.SliceCmd, len(idx))
	for j, i := range idx {
		reads[j] = pipe.HMGet(ctx, s.runKey(batch[i].RunID), "pb", "ver")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: requeue runs: read: %w", err)
	}
	var (
		writes     []int // batch indexes with a write to make
		keys, args = [][]string{}, [][]any{}
		tenants    = map[int]string{}
	)
	for j, i := range idx {
		vals := reads[j].Val()
		pb, okPB := asString(vals[0])
		ver, okVer := asString(vals[1])
		if !okPB || !okVer {
			continue // no such run: nothing to requeue
		}
		w, tenant, err := s.requeueWrite(batch[i], out[i].Epoch, []byte(pb))
		switch {
		case err != nil:
			out[i].Err = err
			continue
		case w.next == nil:
			continue // Take declined it
		}
		writes = append(writes, i)
		keys = append(keys, []string{s.runKey(batch[i].RunID), s.ledgerKey(batch[i].RunID)})
		args = append(args, []any{ver, w.next, w.item})
		tenants[i] = tenant
	}
	res, errs, err := s.evalMany(ctx, "requeue runs", scriptCASAppend, keys, args)
	if err != nil {
		return nil, err
	}
	for j, i := range writes {
		code := int64(casConflict)
		if reply, ok := res[j].([]any); ok && len(reply) == 2 {
			code, _ = reply[0].(int64)
		}
		switch {
		case errs[j] != nil:
			out[i].Err = errs[j]
		case code == casOK:
			out[i].Moved = true
		case code == casConflict: // the run changed since it was read: on its own, reading it again
			out[i].Moved, out[i].Err = s.requeueOne(ctx, batch[i], out[i].Epoch)
		}
		if !out[i].Moved {
			delete(tenants, i)
		}
	}
	return tenants, nil
}

// requeueWrite is the write that requeues run pb for rq (nil next: Take declined it), and the
// run's tenant.
func (s *Store) requeueWrite(rq store.Requeue, epoch int64, pb []byte) (casWrite, string, error) {
	r := &messages.SharedRun{}
	if err := unmarshal("run", pb, r); err != nil {
		return casWrite{}, "", err
	}
	if !rq.Take(r) {
		return casWrite{}, "", nil
	}
	r.Status = messages.RunQueued
	r.UpdatedAt = s.now().UnixNano()
	next, err := marshal("run", r)
	if err != nil {
		return casWrite{}, "", err
	}
	e := proto.Clone(rq.Entry(epoch)).(*messages.LedgerEntry)
	e.SharedRunId, e.Seq = rq.RunID, 0
	if e.At == 0 {
		e.At = r.UpdatedAt
	}
	item, err := marshal("ledger entry", e)
	if err != nil {
		return casWrite{}, "", err
	}
	return casWrite{next: next, item: item}, r.GetTenantId(), nil
}

// requeueOne is the run write of rq alone, with UpdateRunAndAppend's retries.
func (s *Store) requeueOne(ctx context.Context, rq store.Requeue, epoch int64) (bool, error) {
	moved := false
	_, _, err := s.UpdateRunAndAppend(ctx, rq.RunID, func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		moved = rq.Take(r)
		if !moved {
			return nil, nil
		}
		r.Status = messages.RunQueued
		return rq.Entry(epoch), nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return moved && err == nil, err
}

// enqueueBatch releases the hold on From of every run moved and makes it pending in its
// tenant's queue.
func (s *Store) enqueueBatch(ctx context.Context, batch []store.Requeue, out []store.RequeueResult, tenants map[int]string) error {
	var idx []int
	var keys [][]string
	var args [][]any
	for i := range batch {
		if !out[i].Moved {
			continue
		}
		idx = append(idx, i)
		keys = append(keys, []string{s.resvKey(batch[i].From), s.holdOf()})
		args = append(args, []any{batch[i].RunID, batch[i].From, s.tenantHoldsPrefix()})
	}
	// A hold left behind only keeps a slot until it lapses: its failure does not fail the run.
	if _, _, err := s.evalMany(ctx, "release holds", scriptReleaseHold, keys, args); err != nil {
		return err
	}
	keys, args = keys[:0], args[:0]
	for _, i := range idx {
		keys = append(keys, s.qKeys())
		args = append(args, s.qArgs(batch[i].RunID, tenants[i]))
	}
	_, errs, err := s.evalMany(ctx, "enqueue runs", scriptEnqueue, keys, args)
	if err != nil {
		return err
	}
	for j, i := range idx {
		if errs[j] != nil {
			out[i].Err = errs[j]
		}
	}
	return nil
}

// evalMany runs sc once per keys[i], args[i] in one pipeline (loading the script and running
// again the calls it was missing for, after a Redis restart). It returns each call's reply and
// reply error (a script error); err is a transport failure.
func (s *Store) evalMany(ctx context.Context, op string, sc *redis.Script, keys [][]string, args [][]any) ([]any, []error, error) {
	res := make([]any, len(keys))
	errs := make([]error, len(keys))
	todo := make([]int, len(keys))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, i := range todo {
			cmds[j] = sc.EvalSha(ctx, pipe, keys[i], args[i]...)
		}
		_, execErr := pipe.Exec(ctx)
		var retry []int
		for j, i := range todo {
			v, err := cmds[j].Result()
			switch {
			case err == nil || errors.Is(err, redis.Nil):
				res[i] = v
			case redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0:
				retry = append(retry, i)
			case isRedisReplyError(err):
				errs[i] = fmt.Errorf("redisstore: %s: %w", op, err)
			default:
				return nil, nil, fmt.Errorf("redisstore: %s: %w", op, err)
			}
		}
		if len(retry) > 0 {
			if err := sc.Load(ctx, s.rdb).Err(); err != nil {
				return nil, nil, fmt.Errorf("redisstore: %s: reload script: %w", op, err)
			}
		} else if execErr != nil && !isRedisReplyError(execErr) && !errors.Is(execErr, redis.Nil) {
			return nil, nil, fmt.Errorf("redisstore: %s: %w", op, execErr)
		}
		todo = retry
	}
	return res, errs, nil
}
