package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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
	pre := prefix(runID)
	seq := lastSeq(tx.Bucket(bLedger), pre) + 1
	en.Seq = int64(seq)
	if en.At == 0 {
		en.At = now
	}
	return put(tx, bLedger, concat(pre, u64(seq)), en)
}

// lastSeq is the Seq of the last entry of the run whose ledger keys start with pre (0: none).
// Entries are never deleted, so the last key is the last Seq: no counter is kept beside them
// (a transaction that appends dirties the ledger's pages only).
func lastSeq(ledger *bolt.Bucket, pre []byte) uint64 {
	c := ledger.Cursor()
	k, _ := c.Seek(concat(pre, u64(math.MaxUint64)))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if len(k) != len(pre)+8 || !bytes.HasPrefix(k, pre) {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(pre):])
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
