package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Buckets of the per-tenant queues and tenant quotas (store.TenantQueues, store.TenantQuotas).
var (
	bQueueTenant        = []byte("queue_tenant")         // runID -> tenant
	bQueueTenantPending = []byte("queue_tenant_pending") // tenant \0 seq + runID -> nil
	bQueueTenantCount   = []byte("queue_tenant_count")   // "t" + tenant -> item count (u64)
	bHoldOf             = []byte("hold_of")              // runID -> instance \0 tenant
	bRate               = []byte("rate")                 // tenant -> tokens (f64 bits) + at (ns)
)

// tenantPending adds (or removes) runID at seq in its tenant's pending index.
func tenantPending(tx *bolt.Tx, runID string, seq int64, add bool) error {
	t := tx.Bucket(bQueueTenant).Get([]byte(runID))
	k := concat(prefix(string(t)), concat(orderedTime(seq), []byte(runID)))
	b := tx.Bucket(bQueueTenantPending)
	if add {
		return b.Put(k, nil)
	}
	return b.Delete(k)
}

// queueTenant returns *tenant, or the tenant of run runID ("" when the run is missing).
func queueTenant(tx *bolt.Tx, tenant *string, runID string) (string, error) {
	if tenant != nil {
		return *tenant, nil
	}
	var r messages.SharedRun
	ok, err := get(tx, bRuns, []byte(runID), &r)
	if err != nil || !ok {
		return "", err
	}
	return r.GetTenantId(), nil
}

// fileTenant records a new queue item of tenant and counts it.
func fileTenant(tx *bolt.Tx, runID, tenant string) error {
	if err := tx.Bucket(bQueueTenant).Put([]byte(runID), []byte(tenant)); err != nil {
		return fmt.Errorf("file %s under its tenant: %w", runID, err)
	}
	return addCount(tx, tenant, 1)
}

// unfileTenant forgets an acked queue item's tenant and uncounts it.
func unfileTenant(tx *bolt.Tx, runID string) error {
	b := tx.Bucket(bQueueTenant)
	t := b.Get([]byte(runID))
	if t == nil {
		return nil
	}
	tenant := string(t)
	if err := b.Delete([]byte(runID)); err != nil {
		return fmt.Errorf("unfile %s: %w", runID, err)
	}
	return addCount(tx, tenant, -1)
}

// countKey is the key of tenant's item count (bbolt refuses the empty key of tenant "").
func countKey(tenant string) []byte { return []byte("t" + tenant) }

func addCount(tx *bolt.Tx, tenant string, d int64) error {
	b := tx.Bucket(bQueueTenantCount)
	n := int64(0)
	if v := b.Get(countKey(tenant)); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	if n += d; n <= 0 {
		return b.Delete(countKey(tenant))
	}
	return b.Put(countKey(tenant), u64(uint64(n)))
}

// EnqueueTenant makes runID pending in tenantID's queue. See store.TenantQueues.
func (s *Store) EnqueueTenant(ctx context.Context, tenantID, runID string) error {
	return s.enqueue(ctx, &tenantID, runID, false)
}

// Backlog scans the per-tenant pending index, at most limit entries per tenant (it seeks past
// the rest). See store.TenantQueues.
func (s *Store) Backlog(ctx context.Context, limit int) ([]store.TenantBacklog, error) {
	var out []store.TenantBacklog
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		c := tx.Bucket(bQueueTenantPending).Cursor()
		k, _ := c.First()
		for k != nil {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				return fmt.Errorf("backlog: bad key %q", k)
			}
			pre := k[:i+1]
			n := 0
			for ; k != nil && bytes.HasPrefix(k, pre) && (limit <= 0 || n < limit); k, _ = c.Next() {
				n++
			}
			out = append(out, store.TenantBacklog{TenantID: string(pre[:i]), Pending: n})
			if k != nil && bytes.HasPrefix(k, pre) {
				k, _ = c.Seek(concat(pre[:i], []byte{1})) // the next tenant
			}
		}
		return nil
	})
	return out, wrap("backlog", "", err)
}

// ClaimTenants claims per tenant in one write transaction. See store.TenantQueues.
func (s *Store) ClaimTenants(ctx context.Context, pumpID string, want []store.TenantClaim, visibility time.Duration) ([]store.Claim, error) {
	var out []store.Claim
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = []store.Claim{}
		now := s.nowNanos()
		if err := reclaimExpired(tx, now); err != nil {
			return err
		}
		for _, w := range want {
			pre := prefix(w.TenantID)
			var runIDs []string
			c := tx.Bucket(bQueueTenantPending).Cursor()
			for k, _ := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre) && len(runIDs) < w.Max; k, _ = c.Next() {
				runIDs = append(runIDs, string(k[len(pre)+8:]))
			}
			claimed, err := claimItems(tx, pumpID, runIDs, now, visibility)
			if err != nil {
				return err
			}
			out = append(out, claimed...)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("claim tenants", pumpID, err)
	}
	return out, nil
}

// QueuedCount returns tenantID's queue item count. See store.TenantQueues.
func (s *Store) QueuedCount(ctx context.Context, tenantID string) (int, error) {
	n := 0
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bQueueTenantCount).Get(countKey(tenantID)); len(v) == 8 {
			n = int(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, wrap("queued count", tenantID, err)
}

// ReserveForTenant holds an instance slot and a tenant slot in one write transaction. See
// store.TenantQuotas.
func (s *Store) ReserveForTenant(ctx context.Context, instanceID, runID string, limit int, tenantID string, tenantLimit int,
	ttl time.Duration) (bool, bool, error) {
	var ok, tenantFull bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		ok, tenantFull = false, false
		now := s.nowNanos()
		if tenantLimit <= 0 {
			tenantLimit = math.MaxInt
		}
		th := store.TenantHolds(tenantID)
		if room, err := holdRoom(tx, th, runID, tenantLimit, now); err != nil || !room {
			tenantFull = err == nil
			return err
		}
		if room, err := holdRoom(tx, instanceID, runID, limit, now); err != nil || !room {
			return err
		}
		until := orderedTime(deadline(now, ttl))
		b := tx.Bucket(bReservations)
		if err := b.Put(key(instanceID, runID), until); err != nil {
			return err
		}
		if err := b.Put(key(th, runID), until); err != nil {
			return err
		}
		ok = true
		return tx.Bucket(bHoldOf).Put([]byte(runID), key(instanceID, tenantID))
	})
	if err != nil {
		return false, false, wrap("reserve", instanceID+"/"+runID, err)
	}
	return ok, tenantFull, nil
}

// holdRoom drops id's expired holds and reports whether runID holds or may take one of limit.
func holdRoom(tx *bolt.Tx, id, runID string, limit int, now int64) (bool, error) {
	b := tx.Bucket(bReservations)
	pre, mine := prefix(id), key(id, runID)
	var expired [][]byte
	live, held := 0, false
	c := b.Cursor()
	for k, v := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre); k, v = c.Next() {
		switch {
		case decodeTime(v) <= now:
			expired = append(expired, concat(nil, k))
		case bytes.Equal(k, mine):
			held, live = true, live+1
		default:
			live++
		}
	}
	for _, k := range expired {
		if err := b.Delete(k); err != nil {
			return false, fmt.Errorf("drop expired hold: %w", err)
		}
	}
	return held || live < limit, nil
}

// tenantHold returns the reservation key of the tenant hold that follows runID's hold on
// instanceID, or nil.
func tenantHold(tx *bolt.Tx, instanceID, runID string) []byte {
	v := tx.Bucket(bHoldOf).Get([]byte(runID))
	pre := prefix(instanceID)
	if v == nil || !bytes.HasPrefix(v, pre) {
		return nil
	}
	return key(store.TenantHolds(string(v[len(pre):])), runID)
}

// TakeToken takes a token of tenantID's rate bucket in one write transaction. See
// store.TenantQuotas.
func (s *Store) TakeToken(ctx context.Context, tenantID string, rate float64, burst int) (bool, error) {
	if rate <= 0 {
		return true, nil
	}
	burst = max(burst, 1)
	var ok bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bRate)
		now := s.nowNanos()
		tokens, at := float64(burst), now
		if v := b.Get([]byte(tenantID)); len(v) == 16 {
			tokens = math.Float64frombits(binary.BigEndian.Uint64(v[:8]))
			at = min(int64(binary.BigEndian.Uint64(v[8:])), now)
		}
		tokens = min(float64(burst), tokens+float64(now-at)/float64(time.Second)*rate)
		ok = tokens >= 1
		if ok {
			tokens--
		}
		return b.Put([]byte(tenantID), concat(u64(math.Float64bits(tokens)), u64(uint64(now))))
	})
	if err != nil {
		return false, wrap("take token", tenantID, err)
	}
	return ok, nil
}
