package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// defaultRunLimit is ListRuns' cap when RunFilter.Limit is 0.
const defaultRunLimit = 1000

// runPage is how many index entries ListRuns reads per round trip.
const runPage = 256

func (s *Store) runKey(id string) string { return s.k("run", id) }
func (s *Store) runsIndex() string       { return s.k("runs") }

// liveIndex is the index of the runs that are not final (same scores as runsIndex): recovery
// and repair list runs by an active status, and scanning every run ever made for them would
// grow with the history.
func (s *Store) liveIndex() string { return s.k("liveruns") }

// parkedIndex is the index of the runs parked for scale-out (same scores; liveLib names it
// from liveIndex): a finished scale-out request requeues the parked runs of its scope, and
// reading every live run to find them cost seconds per request under a 100,000-run backlog.
// It may list a run that left parked status by a write that keeps only the live index (an
// assignment, an execution's end), which costs a read; it lists every parked run.
func (s *Store) parkedIndex() string { return s.liveIndex() + ":parked" }

// liveArgs are liveLib's arguments for a write of r.
func (s *Store) liveArgs(r *messages.SharedRun) []any {
	op := "add"
	switch {
	case messages.IsTerminalRun(r.Status):
		op = "rem"
	case r.Status == messages.RunScaleOutRequested:
		op = "park"
	}
	return []any{s.liveIndex(), op, r.SharedRunId, r.CreatedAt}
}

// runIndex is the index that lists every run f can match with the fewest others.
func (s *Store) runIndex(f store.RunFilter) string {
	switch {
	case f.ParkedOnly():
		return s.parkedIndex()
	case f.LiveOnly():
		return s.liveIndex()
	case f.TenantID != "":
		return s.tenantRunsIndex(f.TenantID)
	}
	return s.runsIndex()
}
func (s *Store) tenantRunsIndex(tenant string) string {
	return s.k("runs", "t", tenant)
}

// idemKey is length-prefixed so a tenant id containing ':' cannot collide with another pair.
func (s *Store) idemKey(tenant, key string) string {
	return s.k("idem", strconv.Itoa(len(tenant)), tenant, key)
}

// CreateRun stores a new run, setting CreatedAt and UpdatedAt when zero. See store.Runs.
func (s *Store) CreateRun(ctx context.Context, run *messages.SharedRun) (*messages.SharedRun, bool, error) {
	if run.GetSharedRunId() == "" {
		return nil, false, fmt.Errorf("redisstore: create run: empty shared_run_id")
	}
	r := proto.Clone(run).(*messages.SharedRun)
	now := s.now().UnixNano()
	if r.CreatedAt == 0 {
		r.CreatedAt = now
	}
	if r.UpdatedAt == 0 {
		r.UpdatedAt = now
	}
	pb, err := marshal("run", r)
	if err != nil {
		return nil, false, err
	}
	hasIdem := "0"
	if r.IdempotencyKey != "" {
		hasIdem = "1"
	}
	keys := []string{s.runKey(r.SharedRunId), s.idemKey(r.TenantId, r.IdempotencyKey),
		s.runsIndex(), s.tenantRunsIndex(r.TenantId), s.liveIndex()}
	res, err := s.runScript(ctx, "create run "+r.SharedRunId, scriptCreateRun, keys,
		append([]any{pb, r.CreatedAt, r.SharedRunId, hasIdem, s.k("run", "")}, s.liveArgs(r)...)...)
	if err != nil {
		return nil, false, err
	}
	out, _ := res.([]any)
	if len(out) == 0 {
		return nil, false, fmt.Errorf("redisstore: create run %s: unexpected reply %v", r.SharedRunId, res)
	}
	switch code, _ := out[0].(int64); code {
	case 1:
		return r, true, nil
	case 2:
		return nil, false, fmt.Errorf("redisstore: create run %s: %w", r.SharedRunId, store.ErrExists)
	}
	b, ok := asString(out[1])
	if !ok {
		return nil, false, fmt.Errorf("redisstore: create run %s: unexpected reply %v", r.SharedRunId, res)
	}
	existing := &messages.SharedRun{}
	if err := unmarshal("run", []byte(b), existing); err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// GetRun returns the run or store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*messages.SharedRun, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get run %s: %w", id, err)
	}
	cmd := redis.NewStringCmd(ctx, "hget", s.runKey(id), "pb")
	_ = s.batch.do(ctx, cmd) // the command holds its error
	pb, err := cmd.Bytes()
	if err == redis.Nil {
		return nil, fmt.Errorf("redisstore: get run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get run %s: %w", id, err)
	}
	r := &messages.SharedRun{}
	if err := unmarshal("run", pb, r); err != nil {
		return nil, err
	}
	return r, nil
}

// RunByIdempotencyKey returns the run of tenant holding key. See store.Runs.
func (s *Store) RunByIdempotencyKey(ctx context.Context, tenant, key string) (*messages.SharedRun, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get run by idempotency key: %w", err)
	}
	cmd := redis.NewStringCmd(ctx, "get", s.idemKey(tenant, key))
	_ = s.batch.do(ctx, cmd) // the command holds its error
	id, err := cmd.Result()
	if err == redis.Nil {
		return nil, fmt.Errorf("redisstore: get run by idempotency key %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get run by idempotency key %q: %w", key, err)
	}
	return s.GetRun(ctx, id)
}

// GetRuns returns the runs of ids in one pipelined round trip. See store.Runs.
func (s *Store) GetRuns(ctx context.Context, ids []string) ([]*messages.SharedRun, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get runs: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.runKey(id), "pb")
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redisstore: get runs: %w", err)
	}
	out := make([]*messages.SharedRun, len(ids))
	for i, c := range cmds {
		pb, err := c.Bytes()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: get run %s: %w", ids[i], err)
		}
		r := &messages.SharedRun{}
		if err := unmarshal("run", pb, r); err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// UpdateRun applies fn under an optimistic compare-and-set loop and sets UpdatedAt.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(*messages.SharedRun) error) (*messages.SharedRun, error) {
	run, _, err := s.UpdateRunAndAppend(ctx, id, func(r *messages.SharedRun) (*messages.LedgerEntry, error) { return nil, fn(r) })
	return run, err
}

// UpdateRunAndAppend applies fn to the run and pushes the entry fn returns (if any) onto the
// run's ledger in the same script.
func (s *Store) UpdateRunAndAppend(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, error)) (*messages.SharedRun, *messages.LedgerEntry, error) {
	return s.UpdateRunAndMeter(ctx, id, func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		le, err := fn(r)
		return le, nil, err
	})
}

// UpdateRunAndMeter applies fn to the run and pushes the entry fn returns (if any) onto the
// run's ledger and the usage event (if any) onto its tenant's usage, in the same script.
func (s *Store) UpdateRunAndMeter(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error)) (*messages.SharedRun, *messages.LedgerEntry, error) {
	var (
		out   *messages.SharedRun
		entry *messages.LedgerEntry
	)
	seq, err := s.updateVersionedAppend(ctx, "update run "+id, s.runKey(id), s.ledgerKey(id), func(pb []byte) (casWrite, error) {
		r := &messages.SharedRun{}
		if err := unmarshal("run", pb, r); err != nil {
			return casWrite{}, err
		}
		le, ev, err := fn(r)
		if err != nil {
			return casWrite{}, err
		}
		if ev != nil && le == nil {
			return casWrite{}, fmt.Errorf("redisstore: update run %s: usage event without a ledger entry", id)
		}
		r.UpdatedAt = s.now().UnixNano()
		out, entry = r, nil
		w := casWrite{live: s.liveArgs(r)}
		if w.next, err = marshal("run", r); err != nil || le == nil {
			return w, err
		}
		entry = proto.Clone(le).(*messages.LedgerEntry)
		entry.SharedRunId, entry.Seq = id, 0
		if entry.At == 0 {
			entry.At = r.UpdatedAt
		}
		if w.item, err = marshal("ledger entry", entry); err != nil || ev == nil {
			return w, err
		}
		u := proto.Clone(ev).(*messages.UsageEvent)
		if u.At == 0 {
			u.At = r.UpdatedAt
		}
		w.tenant = u.TenantId
		w.usage, err = marshal("usage event", u)
		return w, err
	})
	if err != nil {
		return nil, nil, err
	}
	if entry != nil {
		entry.Seq = seq
	}
	return proto.Clone(out).(*messages.SharedRun), entry, nil
}

// ListRuns returns runs newest first (CreatedAt descending, then id ascending). It pages
// through the creation index and stops once the limit is met and older entries cannot tie.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]*messages.SharedRun, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list runs: %w", err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultRunLimit
	}
	index := s.runIndex(f)
	var (
		matched []*messages.SharedRun
		cutoff  float64 // score of the limit-th match, once reached
	)
	for start := int64(0); ; start += runPage {
		zs, err := s.rdb.ZRevRangeWithScores(ctx, index, start, start+runPage-1).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: list runs: %w", err)
		}
		if len(zs) == 0 {
			break
		}
		ids := make([]string, len(zs))
		for i, z := range zs {
			ids[i] = z.Member.(string)
		}
		runs, err := s.GetRuns(ctx, ids)
		if err != nil {
			return nil, err
		}
		done := false
		for i, z := range zs {
			// Float scores round monotonically, so an entry scoring below the limit-th match
			// is strictly older and cannot displace it.
			if len(matched) >= limit && z.Score < cutoff {
				done = true
				break
			}
			r := runs[i]
			if r == nil || !f.MatchesStatus(r.Status) || (f.TenantID != "" && r.TenantId != f.TenantID) {
				continue
			}
			matched = append(matched, r)
			if len(matched) == limit {
				cutoff = z.Score
			}
		}
		if done || len(zs) < runPage {
			break
		}
	}
	sort.SliceStable(matched, func(i, j int) bool {
		if matched[i].CreatedAt != matched[j].CreatedAt {
			return matched[i].CreatedAt > matched[j].CreatedAt
		}
		return matched[i].SharedRunId < matched[j].SharedRunId
	})
	if len(matched) > limit {
		matched = matched[:limit]
	}
	if matched == nil {
		matched = []*messages.SharedRun{}
	}
	return matched, nil
}

// ScanRuns passes fn the runs matching f, page at a time, by ZSCAN over the index ListRuns
// would read (ZSCAN returns every member present for the whole scan, possibly twice).
func (s *Store) ScanRuns(ctx context.Context, f store.RunFilter, page int, fn func([]*messages.SharedRun) error) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: scan runs: %w", err)
	}
	page = max(page, 1)
	index := s.runIndex(f)
	var cursor uint64
	for {
		kv, next, err := s.rdb.ZScan(ctx, index, cursor, "", int64(page)).Result()
		if err != nil {
			return fmt.Errorf("redisstore: scan runs: %w", err)
		}
		// kv alternates member and score; a small set comes whole, whatever the count.
		for len(kv) > 0 {
			n := min(len(kv)/2, page)
			runs, err := s.readRuns(ctx, kv[:2*n], f)
			if err != nil {
				return err
			}
			if len(runs) > 0 {
				if err := fn(runs); err != nil {
					return err
				}
			}
			kv = kv[2*n:]
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// readRuns reads the runs named by the members of kv (member, score pairs) in one round trip
// and returns those matching f.
func (s *Store) readRuns(ctx context.Context, kv []string, f store.RunFilter) ([]*messages.SharedRun, error) {
	ids := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		ids = append(ids, kv[i])
	}
	runs, err := s.GetRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := runs[:0]
	for _, r := range runs {
		if r != nil && f.MatchesStatus(r.Status) && (f.TenantID == "" || r.TenantId == f.TenantID) {
			out = append(out, r)
		}
	}
	return out, nil
}

// buildLiveIndex indexes the runs that are not final, and the parked ones, once per key space
// (marked by liveruns:built, "2" since the parked index): a store written before an index
// existed gets it at its first Open. A run written meanwhile is indexed by its own write; one
// that ends (or is unparked) meanwhile may stay listed, which costs a read (the listings filter
// by status), never a missed run.
func (s *Store) buildLiveIndex(ctx context.Context) error {
	const built = "2"
	marker := s.k("liveruns", "built")
	if v, err := s.rdb.Get(ctx, marker).Result(); err == nil && v == built {
		return nil
	} else if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for start := int64(0); ; start += runPage {
		ids, err := s.rdb.ZRange(ctx, s.runsIndex(), start, start+runPage-1).Result()
		if err != nil {
			return err
		}
		runs, err := s.GetRuns(ctx, ids)
		if err != nil {
			return err
		}
		var live, parked []redis.Z
		for _, r := range runs {
			if r == nil || messages.IsTerminalRun(r.Status) {
				continue
			}
			z := redis.Z{Score: float64(r.CreatedAt), Member: r.SharedRunId}
			live = append(live, z)
			if r.Status == messages.RunScaleOutRequested {
				parked = append(parked, z)
			}
		}
		for _, ix := range []struct {
			key string
			zs  []redis.Z
		}{{s.liveIndex(), live}, {s.parkedIndex(), parked}} {
			if len(ix.zs) > 0 {
				if err := s.rdb.ZAdd(ctx, ix.key, ix.zs...).Err(); err != nil {
					return err
				}
			}
		}
		if len(ids) < runPage {
			break
		}
	}
	return s.rdb.Set(ctx, marker, built, 0).Err()
}
