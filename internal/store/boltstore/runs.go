package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// defaultRunLimit is ListRuns' cap when the filter sets none.
const defaultRunLimit = 1000

// createdKey is the runs_created index key: newest first, then id.
func createdKey(r *messages.SharedRun) []byte {
	t := orderedTime(r.GetCreatedAt())
	for i := range t {
		t[i] = ^t[i]
	}
	return concat(t, []byte(r.GetSharedRunId()))
}

// CreateRun stores run (see store.Runs). It blocks until durable.
func (s *Store) CreateRun(ctx context.Context, run *messages.SharedRun) (*messages.SharedRun, bool, error) {
	id := run.GetSharedRunId()
	if id == "" || strings.Contains(id, sep) {
		return nil, false, fmt.Errorf("boltstore: create run: empty id or id with NUL %q", id)
	}
	var out *messages.SharedRun
	var created bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out, created = nil, false
		var idem []byte
		if run.GetIdempotencyKey() != "" {
			idem = key(run.GetTenantId(), run.GetIdempotencyKey())
			if existing := tx.Bucket(bRunsIdem).Get(idem); existing != nil {
				r := &messages.SharedRun{}
				ok, err := get(tx, bRuns, existing, r)
				if err != nil {
					return err
				}
				if ok {
					out = r
					return nil
				}
			}
		}
		if tx.Bucket(bRuns).Get([]byte(id)) != nil {
			return fmt.Errorf("boltstore: create run %s: %w", id, store.ErrExists)
		}
		r := proto.Clone(run).(*messages.SharedRun)
		now := s.nowNanos()
		if r.CreatedAt == 0 {
			r.CreatedAt = now
		}
		if r.UpdatedAt == 0 {
			r.UpdatedAt = now
		}
		if err := put(tx, bRuns, []byte(id), r); err != nil {
			return err
		}
		if err := tx.Bucket(bRunsCreated).Put(createdKey(r), nil); err != nil {
			return fmt.Errorf("index run %s: %w", id, err)
		}
		if err := indexLive(tx, nil, r); err != nil {
			return err
		}
		if idem != nil {
			if err := tx.Bucket(bRunsIdem).Put(idem, []byte(id)); err != nil {
				return fmt.Errorf("index run %s: %w", id, err)
			}
		}
		out, created = r, true
		return nil
	})
	if err != nil {
		return nil, false, wrap("create run", id, err)
	}
	return out, created, nil
}

// GetRun returns the run or store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*messages.SharedRun, error) {
	r := &messages.SharedRun{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return getFound(tx, bRuns, []byte(id), r)
	})
	if err != nil {
		return nil, wrap("get run", id, err)
	}
	return r, nil
}

// RunByIdempotencyKey returns the run of tenant holding key. See store.Runs.
func (s *Store) RunByIdempotencyKey(ctx context.Context, tenant, idemKey string) (*messages.SharedRun, error) {
	r := &messages.SharedRun{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		id := tx.Bucket(bRunsIdem).Get(key(tenant, idemKey))
		if id == nil {
			return store.ErrNotFound
		}
		return getFound(tx, bRuns, id, r)
	})
	if err != nil {
		return nil, wrap("get run by idempotency key", idemKey, err)
	}
	return r, nil
}

// GetRuns returns the runs of ids from one read transaction. See store.Runs.
func (s *Store) GetRuns(ctx context.Context, ids []string) ([]*messages.SharedRun, error) {
	out := make([]*messages.SharedRun, len(ids))
	err := s.view(ctx, func(tx *bolt.Tx) error {
		for i, id := range ids {
			r := &messages.SharedRun{}
			ok, err := get(tx, bRuns, []byte(id), r)
			if err != nil {
				return err
			}
			if ok {
				out[i] = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("get runs", "", err)
	}
	return out, nil
}

// UpdateRun applies fn in one write transaction and sets UpdatedAt. fn may run more than once.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(*messages.SharedRun) error) (*messages.SharedRun, error) {
	run, _, err := s.UpdateRunAndAppend(ctx, id, func(r *messages.SharedRun) (*messages.LedgerEntry, error) { return nil, fn(r) })
	return run, err
}

// UpdateRunAndAppend applies fn to the run and appends the entry fn returns (if any) in one
// transaction.
func (s *Store) UpdateRunAndAppend(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, error)) (*messages.SharedRun, *messages.LedgerEntry, error) {
	return s.UpdateRunAndMeter(ctx, id, func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		le, err := fn(r)
		return le, nil, err
	})
}

// UpdateRunAndMeter applies fn to the run and appends the entry and stores the usage event fn
// returns (if any) in one transaction.
func (s *Store) UpdateRunAndMeter(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error)) (*messages.SharedRun, *messages.LedgerEntry, error) {
	var out *messages.SharedRun
	var appended *messages.LedgerEntry
	var fnErr error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out, appended, fnErr = nil, nil, nil
		r := &messages.SharedRun{}
		ok, err := get(tx, bRuns, []byte(id), r)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("boltstore: update run %s: %w", id, store.ErrNotFound)
		}
		oldIdx := createdKey(r)
		entry, ev, err := fn(r)
		if err != nil {
			fnErr = err
			return err
		}
		if ev != nil && entry == nil {
			return fmt.Errorf("usage event without a ledger entry")
		}
		r.SharedRunId = id
		r.UpdatedAt = s.nowNanos()
		if newIdx := createdKey(r); !bytes.Equal(oldIdx, newIdx) {
			idx := tx.Bucket(bRunsCreated)
			if err := idx.Delete(oldIdx); err != nil {
				return fmt.Errorf("reindex run %s: %w", id, err)
			}
			if err := idx.Put(newIdx, nil); err != nil {
				return fmt.Errorf("reindex run %s: %w", id, err)
			}
		}
		if err := put(tx, bRuns, []byte(id), r); err != nil {
			return err
		}
		if err := indexLive(tx, oldIdx, r); err != nil {
			return err
		}
		if err := bumpRunVersion(tx, id); err != nil {
			return err
		}
		if entry != nil {
			appended = proto.Clone(entry).(*messages.LedgerEntry)
			appended.SharedRunId = id
			if err := appendEntry(tx, s.nowNanos(), appended); err != nil {
				return err
			}
		}
		if ev != nil {
			if err := putUsage(tx, r.UpdatedAt, ev); err != nil {
				return err
			}
		}
		out = r
		return nil
	})
	if fnErr != nil && err == fnErr {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, wrap("update run", id, err)
	}
	return out, appended, nil
}

// ListRuns returns runs matching f, newest first (CreatedAt desc, then id asc).
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]*messages.SharedRun, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultRunLimit
	}
	out := []*messages.SharedRun{}
	index := runIndex(f)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		runs := tx.Bucket(bRuns)
		c := tx.Bucket(index).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			id := k[8:]
			v := runs.Get(id)
			if v == nil {
				continue
			}
			r := &messages.SharedRun{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decode run %s: %w", id, err)
			}
			if (f.TenantID != "" && r.GetTenantId() != f.TenantID) || !f.MatchesStatus(r.GetStatus()) {
				continue
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list runs", "", err)
	}
	return out, nil
}

// ScanRuns passes fn the runs matching f, page at a time, newest first. Each page is read in
// a read transaction of its own, closed before fn runs (fn may write to the store), and the
// next one resumes after the last index key read.
func (s *Store) ScanRuns(ctx context.Context, f store.RunFilter, page int, fn func([]*messages.SharedRun) error) error {
	page = max(page, 1)
	index := runIndex(f)
	var after []byte
	for {
		var runs []*messages.SharedRun
		done := true
		err := s.view(ctx, func(tx *bolt.Tx) error {
			all := tx.Bucket(bRuns)
			c := tx.Bucket(index).Cursor()
			k, _ := c.First()
			if after != nil {
				if k, _ = c.Seek(after); k != nil && bytes.Equal(k, after) {
					k, _ = c.Next()
				}
			}
			for read := 0; k != nil; k, _ = c.Next() {
				if read == page {
					done = false
					return nil
				}
				read++
				after = append(after[:0], k...)
				v := all.Get(k[8:])
				if v == nil {
					continue
				}
				r := &messages.SharedRun{}
				if err := proto.Unmarshal(v, r); err != nil {
					return fmt.Errorf("decode run %s: %w", k[8:], err)
				}
				if (f.TenantID == "" || r.GetTenantId() == f.TenantID) && f.MatchesStatus(r.GetStatus()) {
					runs = append(runs, r)
				}
			}
			return nil
		})
		if err != nil {
			return wrap("scan runs", "", err)
		}
		if len(runs) > 0 {
			if err := fn(runs); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// runIndex is the index that lists every run f can match with the fewest others: recovery's
// scans read the runs that have not ended, not the history, and a finished scale-out request
// reads the parked runs.
func runIndex(f store.RunFilter) []byte {
	switch {
	case f.ParkedOnly():
		return bRunsParked
	case f.LiveOnly():
		return bRunsLive
	}
	return bRunsCreated
}

// indexLive keeps the live-runs and parked-runs indexes in step with a write of r whose
// creation key was oldIdx (nil for a new run): r is listed in the first while it is not final,
// in the second while it is parked for scale-out (every finished scale-out request scans them).
func indexLive(tx *bolt.Tx, oldIdx []byte, r *messages.SharedRun) error {
	for _, ix := range []struct {
		bucket []byte
		listed bool
	}{{bRunsLive, !messages.IsTerminalRun(r.Status)}, {bRunsParked, r.Status == messages.RunScaleOutRequested}} {
		b := tx.Bucket(ix.bucket)
		if oldIdx != nil {
			if err := b.Delete(oldIdx); err != nil {
				return fmt.Errorf("unindex run %s from %s: %w", r.SharedRunId, ix.bucket, err)
			}
		}
		if !ix.listed {
			continue
		}
		if err := b.Put(createdKey(r), nil); err != nil {
			return fmt.Errorf("index run %s in %s: %w", r.SharedRunId, ix.bucket, err)
		}
	}
	return nil
}

// buildLiveIndex lists every run that is not final in the live-runs index, and every parked
// one in the parked-runs index.
func buildLiveIndex(tx *bolt.Tx) error {
	return tx.Bucket(bRuns).ForEach(func(k, v []byte) error {
		if isVersionKey(k) {
			return nil
		}
		r := &messages.SharedRun{}
		if err := proto.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode run %s: %w", k, err)
		}
		return indexLive(tx, nil, r)
	})
}
