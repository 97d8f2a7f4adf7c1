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

// RequeueRuns fences and requeues a batch of runs in four pipelined round trips (run reads,
// fences, conditional run writes with their entries, hold releases with enqueues), whatever its
// size; a run whose record changed between its fence and its write is retried on its own. See
// store.Recovery.
func (s *Store) RequeueRuns(ctx context.Context, batch []store.Requeue) ([]store.RequeueResult, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: requeue runs: %w", err)
	}
	out := make([]store.RequeueResult, len(batch))
	taken, err := s.takeBatch(ctx, batch, out)
	if err != nil {
		return nil, err
	}
	if err := s.fenceBatch(ctx, batch, taken, out); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requeueTimeout)
	defer cancel()
	if err := s.requeueBatch(ctx, batch, taken, out); err != nil {
		return nil, err
	}
	if err := s.enqueueBatch(ctx, batch, taken, out); err != nil {
		return nil, err
	}
	return out, nil
}

// takenRun is a run of a batch that Take accepted: the version it was read at, its next
// record and its tenant.
type takenRun struct {
	ver    string
	next   []byte
	tenant string
}

// takeBatch reads every run of batch and returns those Take accepts (by batch index), with
// their next records; a run that cannot be decoded gets its error in out.
func (s *Store) takeBatch(ctx context.Context, batch []store.Requeue, out []store.RequeueResult) (map[int]*takenRun, error) {
	pipe := s.rdb.Pipeline()
	reads := make([]*redis.SliceCmd, len(batch))
	for i, rq := range batch {
		reads[i] = pipe.HMGet(ctx, s.runKey(rq.RunID), "pb", "ver")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: requeue runs: read: %w", err)
	}
	taken := map[int]*takenRun{}
	for i, rq := range batch {
		vals := reads[i].Val()
		pb, okPB := asString(vals[0])
		ver, okVer := asString(vals[1])
		if !okPB || !okVer {
			continue // no such run: nothing to requeue
		}
		r := &messages.SharedRun{}
		if err := unmarshal("run", []byte(pb), r); err != nil {
			out[i].Err = err
			continue
		}
		if !rq.Take(r) {
			continue
		}
		r.Status = messages.RunQueued
		r.UpdatedAt = s.now().UnixNano()
		next, err := marshal("run", r)
		if err != nil {
			out[i].Err = err
			continue
		}
		taken[i] = &takenRun{ver: ver, next: next, tenant: r.GetTenantId()}
	}
	return taken, nil
}

// fenceBatch fences the execution of every taken run while the run is still at the version
// Take saw, records each outcome in out, and drops from taken the runs it did not fence.
func (s *Store) fenceBatch(ctx context.Context, batch []store.Requeue, taken map[int]*takenRun, out []store.RequeueResult) error {
	var idx []int
	var keys [][]string
	var args [][]any
	now := s.now().UnixNano()
	for i, t := range taken {
		rq := batch[i]
		if rq.ExecutionID == "" {
			out[i].Fenced = true
			continue
		}
		idx = append(idx, i)
		keys = append(keys, []string{s.execKey(rq.ExecutionID), s.runKey(rq.RunID)})
		args = append(args, []any{rq.Owner, rq.From, now, s.execIndexPrefix(), rq.ExecutionID, t.ver})
	}
	res, errs, err := s.evalMany(ctx, "fence executions", scriptFenceIfRunAt, keys, args)
	if err != nil {
		return err
	}
	for j, i := range idx {
		reply, ok := res[j].([]any)
		switch {
		case errs[j] != nil:
			out[i].Err = errs[j]
		case !ok || len(reply) != 2:
			out[i].Err = fmt.Errorf("redisstore: fence execution %s: unexpected reply %v", batch[i].ExecutionID, res[j])
		default:
			code, _ := reply[0].(int64)
			epoch, _ := reply[1].(int64)
			switch code {
			case -1: // a missing execution fences nothing, at epoch 0
				out[i].Fenced = true
			case 1:
				out[i].Epoch, out[i].Fenced = epoch, true
			case 0:
				out[i].Epoch = epoch // a newer activation took it: the run has moved
			} // -2: the run changed since Take saw it; the next recovery judges it afresh
		}
		if !out[i].Fenced {
			delete(taken, i)
		}
	}
	return nil
}

// requeueBatch writes the next record of every fenced run, with its entry, while the run is
// still at the version Take saw (a run changed since is taken again on its own), and drops
// from taken the runs it did not move.
func (s *Store) requeueBatch(ctx context.Context, batch []store.Requeue, taken map[int]*takenRun, out []store.RequeueResult) error {
	var idx []int
	var keys [][]string
	var args [][]any
	for i, t := range taken {
		e := proto.Clone(batch[i].Entry(out[i].Epoch)).(*messages.LedgerEntry)
		e.SharedRunId, e.Seq = batch[i].RunID, 0
		if e.At == 0 {
			e.At = s.now().UnixNano()
		}
		item, err := marshal("ledger entry", e)
		if err != nil {
			out[i].Err = err
			delete(taken, i)
			continue
		}
		idx = append(idx, i)
		keys = append(keys, []string{s.runKey(batch[i].RunID), s.ledgerKey(batch[i].RunID)})
		args = append(args, []any{t.ver, t.next, item})
	}
	res, errs, err := s.evalMany(ctx, "requeue runs", scriptCASAppend, keys, args)
	if err != nil {
		return err
	}
	for j, i := range idx {
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
			delete(taken, i)
		}
	}
	return nil
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

// enqueueBatch releases the hold on From of every run moved and makes it pending at the front
// of its tenant's queue (see store.Queue.EnqueueFront).
func (s *Store) enqueueBatch(ctx context.Context, batch []store.Requeue, moved map[int]*takenRun, out []store.RequeueResult) error {
	var idx []int
	var keys [][]string
	var args [][]any
	for i := range moved {
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
		args = append(args, s.qArgs(batch[i].RunID, moved[i].tenant, "1")) // at the front, as EnqueueFront
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
	return s.evalEach(ctx, op, func(int) *redis.Script { return sc }, keys, args)
}

// evalEach is evalMany with call i running script(i).
func (s *Store) evalEach(ctx context.Context, op string, script func(i int) *redis.Script, keys [][]string, args [][]any) ([]any, []error, error) {
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
			cmds[j] = script(i).EvalSha(ctx, pipe, keys[i], args[i]...)
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
			loaded := map[*redis.Script]bool{}
			for _, i := range retry {
				if sc := script(i); !loaded[sc] {
					if err := sc.Load(ctx, s.rdb).Err(); err != nil {
						return nil, nil, fmt.Errorf("redisstore: %s: reload script: %w", op, err)
					}
					loaded[sc] = true
				}
			}
		} else if execErr != nil && !isRedisReplyError(execErr) && !errors.Is(execErr, redis.Nil) {
			return nil, nil, fmt.Errorf("redisstore: %s: %w", op, execErr)
		}
		todo = retry
	}
	return res, errs, nil
}
