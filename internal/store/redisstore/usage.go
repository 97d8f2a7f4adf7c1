package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var _ store.LeaseReader = (*Store)(nil)

// Usage events live in one list per tenant plus a set of tenants; leases are hashes of holder
// and deadline.
func (s *Store) usageKey(tenant string) string { return s.k("usage", "t", tenant) }
func (s *Store) usageTenants() string          { return s.k("usage", "tenants") }
func (s *Store) leaseKey(name string) string   { return s.k("lease", name) }

// AppendUsage stores events (At set to Now when zero) in one transaction.
func (s *Store) AppendUsage(ctx context.Context, events ...*messages.UsageEvent) error {
	if len(events) == 0 {
		return nil
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: append usage: %w", err)
	}
	now := s.now().UnixNano()
	pbs := make([][]byte, len(events))
	for i, ev := range events {
		e := proto.Clone(ev).(*messages.UsageEvent)
		if e.At == 0 {
			e.At = now
		}
		b, err := marshal("usage event", e)
		if err != nil {
			return err
		}
		pbs[i] = b
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, ev := range events {
			p.RPush(ctx, s.usageKey(ev.GetTenantId()), pbs[i])
			p.SAdd(ctx, s.usageTenants(), ev.GetTenantId())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: append usage: %w", err)
	}
	return nil
}

// ListUsage returns the events of f.TenantID (all tenants when empty) with From <= At < To,
// ordered by At.
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]*messages.UsageEvent, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list usage: %w", err)
	}
	tenants := []string{f.TenantID}
	if f.TenantID == "" {
		all, err := s.rdb.SMembers(ctx, s.usageTenants()).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: list usage: %w", err)
		}
		sort.Strings(all)
		tenants = all
	}
	out := []*messages.UsageEvent{}
	if len(tenants) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(tenants))
	for i, t := range tenants {
		cmds[i] = pipe.LRange(ctx, s.usageKey(t), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: list usage: %w", err)
	}
	fromNs, toNs := f.Nanos()
	for _, c := range cmds {
		for _, b := range c.Val() {
			e := &messages.UsageEvent{}
			if err := unmarshal("usage event", []byte(b), e); err != nil {
				return nil, err
			}
			if e.At < fromNs || e.At >= toNs {
				continue
			}
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, nil
}

// AcquireLease takes name for holder if it is free, expired or already held by holder
// (renewing it for ttl). It reports whether holder now holds it.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if holder == "" {
		return false, fmt.Errorf("redisstore: acquire lease %s: empty holder", name)
	}
	res, err := s.runScript(ctx, "acquire lease "+name, scriptAcquireLease,
		[]string{s.leaseKey(name)}, holder, s.nowMicros(), s.deadline(ttl), (ttl + leaseKeyMargin).Milliseconds())
	if err != nil {
		return false, err
	}
	n, _ := res.(int64)
	return n == 1, nil
}

// leaseKeyMargin is how long a lease's key outlives the lease (scriptAcquireLease).
const leaseKeyMargin = time.Minute

// LeaseExpiry returns when name's lease lapses and its holder, or the zero time and "" when it
// is free. See store.LeaseReader.
func (s *Store) LeaseExpiry(ctx context.Context, name string) (time.Time, string, error) {
	if err := s.check(); err != nil {
		return time.Time{}, "", fmt.Errorf("redisstore: read lease %s: %w", name, err)
	}
	vals, err := s.rdb.HMGet(ctx, s.leaseKey(name), "holder", "deadline").Result()
	if err != nil {
		return time.Time{}, "", fmt.Errorf("redisstore: read lease %s: %w", name, err)
	}
	holder, _ := asString(vals[0])
	raw, _ := asString(vals[1])
	deadline, err := strconv.ParseInt(raw, 10, 64)
	if holder == "" || err != nil || deadline <= s.nowMicros() {
		return time.Time{}, "", nil
	}
	return time.UnixMicro(deadline), holder, nil
}

// ReleaseLease drops name if holder holds it; otherwise it does nothing.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := s.runScript(ctx, "release lease "+name, scriptReleaseLease, []string{s.leaseKey(name)}, holder)
	return err
}
