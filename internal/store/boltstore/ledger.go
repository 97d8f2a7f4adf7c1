package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// appendEntry assigns en the run's next Seq (and At when zero) and stores it. en is modified.
func appendEntry(tx *bolt.Tx, now int64, en *messages.LedgerEntry) error {
	runID := en.GetSharedRunId()
	if runID == "" {
		return errors.New("boltstore: append ledger: entry without shared run id")
	}
	seqs := tx.Bucket(bLedgerSeq)
	var seq uint64
	if v := seqs.Get([]byte(runID)); len(v) == 8 {
		seq = binary.BigEndian.Uint64(v)
	}
	seq++
	if err := seqs.Put([]byte(runID), u64(seq)); err != nil {
		return fmt.Errorf("ledger seq %s: %w", runID, err)
	}
	en.Seq = int64(seq)
	if en.At == 0 {
		en.At = now
	}
	return put(tx, bLedger, concat(prefix(runID), u64(seq)), en)
}

// Append adds entries to their runs' ledgers in one transaction and returns copies with Seq
// and At set. The caller's entries are not modified.
func (s *Store) Append(ctx context.Context, entries ...*messages.LedgerEntry) ([]*messages.LedgerEntry, error) {
	out := make([]*messages.LedgerEntry, len(entries))
	err := s.update(ctx, func(tx *bolt.Tx) error { return appendEntries(tx, s.nowNanos(), entries, out) })
	if err != nil {
		return nil, wrap("append ledger", "", err)
	}
	return out, nil
}

// appendEntries appends a copy of each entry, stored as out[i] with Seq and At set.
func appendEntries(tx *bolt.Tx, now int64, entries, out []*messages.LedgerEntry) error {
	for i, e := range entries {
		out[i] = proto.Clone(e).(*messages.LedgerEntry)
		if err := appendEntry(tx, now, out[i]); err != nil {
			return err
		}
	}
	return nil
}

// ReadLedger returns entries of sharedRunID with Seq > afterSeq in order, at most limit (0: all).
func (s *Store) ReadLedger(ctx context.Context, sharedRunID string, afterSeq int64, limit int) ([]*messages.LedgerEntry, error) {
	out := []*messages.LedgerEntry{}
	if afterSeq < 0 {
		afterSeq = 0
	}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		pre := prefix(sharedRunID)
		c := tx.Bucket(bLedger).Cursor()
		for k, v := c.Seek(concat(pre, u64(uint64(afterSeq)+1))); k != nil && bytes.HasPrefix(k, pre); k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			en := &messages.LedgerEntry{}
			if err := proto.Unmarshal(v, en); err != nil {
				return fmt.Errorf("decode ledger %s: %w", sharedRunID, err)
			}
			out = append(out, en)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("read ledger", sharedRunID, err)
	}
	return out, nil
}
