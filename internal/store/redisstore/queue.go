package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/store"
)

// Queue keys: pending is a zset scored by a sequence number (FIFO), claimed a zset scored by
// the claim's visibility deadline, tokens a hash of the current claim token per item.
func (s *Store) qPending() string { return s.k("q", "pending") }
func (s *Store) qClaimed() string { return s.k("q", "claimed") }
func (s *Store) qTokens() string  { return s.k("q", "tokens") }
func (s *Store) qSeq() string     { return s.k("q", "seq") }

// Per-tenant queue keys (store.TenantQueues): the set of tenants with pending items, the
// tenant of each item, the item count per tenant, and the prefix of each tenant's pending zset
// (scored like the pending zset).
func (s *Store) qTenants() string      { return s.k("q", "tenants") }
func (s *Store) qTenantOf() string     { return s.k("q", "tenant") }
func (s *Store) qCount() string        { return s.k("q", "count") }
func (s *Store) qTenantPrefix() string { return s.k("q", "pt", "") }

// qKeys are the keys every queue script takes (see qlib).
func (s *Store) qKeys() []string {
	return []string{s.qPending(), s.qClaimed(), s.qTokens(), s.qSeq(), s.qTenants(), s.qTenantOf(), s.qCount()}
}

// qArgs are the ARGV of a queue script: the tenant zset prefix, then args.
func (s *Store) qArgs(args ...any) []any { return append([]any{s.qTenantPrefix()}, args...) }

// newToken returns a random claim token for pumpID: "<pumpID>/<random>", so the claims of a
// dead pump can be found (ReleaseClaimsOf).
func newToken(pumpID string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redisstore: claim token: %w", err)
	}
	return pumpID + "/" + hex.EncodeToString(b[:]), nil
}

// Enqueue makes runID pending at the tail of its tenant's queue (read from the run); a pending
// or claimed item is left alone.
func (s *Store) Enqueue(ctx context.Context, runID string) error {
	return s.enqueueRun(ctx, runID, false)
}

// EnqueueFront makes runID pending ahead of every pending item. See store.Queue.
func (s *Store) EnqueueFront(ctx context.Context, runID string) error {
	return s.enqueueRun(ctx, runID, true)
}

// enqueueRun is enqueue in the queue of runID's tenant (read from the run; "" when there is
// no run).
func (s *Store) enqueueRun(ctx context.Context, runID string, front bool) error {
	tenant := ""
	run, err := s.GetRun(ctx, runID)
	switch {
	case err == nil:
		tenant = run.GetTenantId()
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("redisstore: enqueue %s: %w", runID, err)
	}
	return s.enqueue(ctx, tenant, runID, front)
}

// EnqueueTenant makes runID pending at the tail of tenantID's queue. See store.TenantQueues.
func (s *Store) EnqueueTenant(ctx context.Context, tenantID, runID string) error {
	return s.enqueue(ctx, tenantID, runID, false)
}

// enqueue makes runID pending in tenantID's queue, at the tail or the front.
func (s *Store) enqueue(ctx context.Context, tenantID, runID string, front bool) error {
	where := "0"
	if front {
		where = "1"
	}
	_, err := s.runScript(ctx, "enqueue "+runID, scriptEnqueue, s.qKeys(), s.qArgs(runID, tenantID, where)...)
	return err
}

// Claim returns timed-out claims to their places in the pending order, then claims up to max oldest pending
// items for visibility, each with a fresh token.
func (s *Store) Claim(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]store.Claim, error) {
	if max < 0 {
		max = 0
	}
	args := s.qArgs(s.nowMicros(), s.deadline(visibility), max)
	args, err := appendTokens(args, pumpID, max)
	if err != nil {
		return nil, err
	}
	res, err := s.runScript(ctx, "claim for "+pumpID, scriptClaim, s.qKeys(), args...)
	if err != nil {
		return nil, err
	}
	return claims(pumpID, res)
}

// appendTokens appends n fresh claim tokens of pumpID to args.
func appendTokens(args []any, pumpID string, n int) ([]any, error) {
	for range n {
		tok, err := newToken(pumpID)
		if err != nil {
			return nil, err
		}
		args = append(args, tok)
	}
	return args, nil
}

// claims decodes a claim script's flat id, token list.
func claims(pumpID string, res any) ([]store.Claim, error) {
	flat, _ := res.([]any)
	out := make([]store.Claim, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		id, ok1 := asString(flat[i])
		tok, ok2 := asString(flat[i+1])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("redisstore: claim for %s: unexpected reply %v", pumpID, res)
		}
		out = append(out, store.Claim{RunID: id, Token: tok})
	}
	return out, nil
}

// Ack removes a claimed item, or returns store.ErrClaimLost when c.Token no longer holds it.
func (s *Store) Ack(ctx context.Context, c store.Claim) error {
	res, err := s.runScript(ctx, "ack "+c.RunID, scriptAck, s.qKeys(), s.qArgs(c.RunID, c.Token)...)
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("redisstore: ack %s: %w", c.RunID, store.ErrClaimLost)
	}
	return nil
}

// Release makes a claimed item pending again at its place, or returns store.ErrClaimLost when
// c.Token no longer holds it.
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	res, err := s.runScript(ctx, "release "+c.RunID, scriptRelease, s.qKeys(), s.qArgs(c.RunID, c.Token)...)
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("redisstore: release %s: %w", c.RunID, store.ErrClaimLost)
	}
	return nil
}

// ReleaseClaimsOf makes every item claimed by pumpID pending again at its place.
func (s *Store) ReleaseClaimsOf(ctx context.Context, pumpID string) (int, error) {
	res, err := s.runScript(ctx, "release claims of "+pumpID, scriptReleaseOwner, s.qKeys(), s.qArgs(pumpID+"/")...)
	if err != nil {
		return 0, err
	}
	n, _ := res.(int64)
	return int(n), nil
}

// QueueDepth returns the pending and claimed counts in one round trip.
func (s *Store) QueueDepth(ctx context.Context) (pending, claimed int64, err error) {
	if err := s.check(); err != nil {
		return 0, 0, fmt.Errorf("redisstore: queue depth: %w", err)
	}
	pipe := s.rdb.Pipeline()
	p := pipe.ZCard(ctx, s.qPending())
	c := pipe.ZCard(ctx, s.qClaimed())
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("redisstore: queue depth: %w", err)
	}
	return p.Val(), c.Val(), nil
}
