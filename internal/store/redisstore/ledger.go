package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// A run's ledger is a list of entry pbs; an entry's Seq is its 1-based position, so Seq is
// assigned atomically by RPUSH and is not stored in the pb.
func (s *Store) ledgerKey(runID string) string { return s.k("ledger", runID) }

// Append adds entries to their runs' ledgers in one script, assigning Seq (the list position)
// and At (Now when zero). It returns copies with those set.
func (s *Store) Append(ctx context.Context, entries ...*messages.LedgerEntry) ([]*messages.LedgerEntry, error) {
	if len(entries) == 0 {
		return []*messages.LedgerEntry{}, nil
	}
	now := s.now().UnixNano()
	out := make([]*messages.LedgerEntry, len(entries))
	keys := make([]string, len(entries))
	args := make([]any, len(entries))
	for i, le := range entries {
		if le.GetSharedRunId() == "" {
			return nil, fmt.Errorf("redisstore: append ledger: entry %d has no shared_run_id", i)
		}
		e := proto.Clone(le).(*messages.LedgerEntry)
		e.Seq = 0
		if e.At == 0 {
			e.At = now
		}
		b, err := marshal("ledger entry", e)
		if err != nil {
			return nil, err
		}
		out[i], keys[i], args[i] = e, s.ledgerKey(e.SharedRunId), b
	}
	res, err := s.runScript(ctx, "append ledger", scriptAppend, keys, args...)
	if err != nil {
		return nil, err
	}
	seqs, _ := res.([]any)
	if len(seqs) != len(out) {
		return nil, fmt.Errorf("redisstore: append ledger: unexpected reply %v", res)
	}
	for i, v := range seqs {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("redisstore: append ledger: unexpected reply %v", res)
		}
		out[i].Seq = n
	}
	return out, nil
}

// ReadLedgers is ReadLedger for many runs in one round trip: it returns, for every run id of
// after, the entries with Seq greater than after[id] (every entry of a run whose ledger holds
// none is left out of the answer). It blocks on one pipelined read; the caller owns the maps.
func (s *Store) ReadLedgers(ctx context.Context, after map[string]int64) (map[string][]*messages.LedgerEntry, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: read ledgers: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make(map[string]*redis.StringSliceCmd, len(after))
	for id, seq := range after {
		cmds[id] = pipe.LRange(ctx, s.ledgerKey(id), max(seq, 0), -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: read ledgers: %w", err)
	}
	out := make(map[string][]*messages.LedgerEntry, len(after))
	for id, cmd := range cmds {
		vals := cmd.Val()
		if len(vals) == 0 {
			continue
		}
		entries, err := decodeLedger(id, max(after[id], 0), vals)
		if err != nil {
			return nil, err
		}
		out[id] = entries
	}
	return out, nil
}

// decodeLedger decodes the entries of run id read from position afterSeq on.
func decodeLedger(id string, afterSeq int64, vals []string) ([]*messages.LedgerEntry, error) {
	out := make([]*messages.LedgerEntry, len(vals))
	for i, v := range vals {
		e := &messages.LedgerEntry{}
		if err := unmarshal("ledger entry", []byte(v), e); err != nil {
			return nil, err
		}
		e.Seq = afterSeq + int64(i) + 1
		if e.SharedRunId == "" {
			e.SharedRunId = id
		}
		out[i] = e
	}
	return out, nil
}

// ReadLedger returns entries with Seq > afterSeq in Seq order, at most limit (0 means all).
func (s *Store) ReadLedger(ctx context.Context, sharedRunID string, afterSeq int64, limit int) ([]*messages.LedgerEntry, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: read ledger %s: %w", sharedRunID, err)
	}
	if afterSeq < 0 {
		afterSeq = 0
	}
	stop := int64(-1)
	if limit > 0 {
		stop = afterSeq + int64(limit) - 1
	}
	cmd := redis.NewStringSliceCmd(ctx, "lrange", s.ledgerKey(sharedRunID), afterSeq, stop)
	_ = s.batch.do(ctx, cmd) // a hot read (every event stream's): the command holds its error
	vals, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: read ledger %s: %w", sharedRunID, err)
	}
	return decodeLedger(sharedRunID, afterSeq, vals)
}
