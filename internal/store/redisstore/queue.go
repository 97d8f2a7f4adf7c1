package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// newToken returns a random claim token for pumpID: "<pumpID>/<random>", so the claims of a
// dead pump can be found (ReleaseClaimsOf).
func newToken(pumpID string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redisstore: claim token: %w", err)
	}
	return pumpID + "/" + hex.EncodeToString(b[:]), nil
}

// Enqueue makes runID pending at the tail; a pending or claimed item is left alone.
func (s *Store) Enqueue(ctx context.Context, runID string) error {
	_, err := s.runScript(ctx, "enqueue "+runID, scriptEnqueue,
		[]string{s.qPending(), s.qClaimed(), s.qSeq()}, runID)
	return err
}

// Claim returns timed-out claims to the pending tail, then claims up to max oldest pending
// items for visibility, each with a fresh token.
func (s *Store) Claim(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]store.Claim, error) {
	if max < 0 {
		max = 0
	}
	args := make([]any, 0, 3+max)
	args = append(args, s.nowMicros(), s.deadline(visibility), max)
	for range max {
		tok, err := newToken(pumpID)
		if err != nil {
			return nil, err
		}
		args = append(args, tok)
	}
	res, err := s.runScript(ctx, "claim for "+pumpID, scriptClaim,
		[]string{s.qPending(), s.qClaimed(), s.qTokens(), s.qSeq()}, args...)
	if err != nil {
		return nil, err
	}
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
	res, err := s.runScript(ctx, "ack "+c.RunID, scriptAck,
		[]string{s.qClaimed(), s.qTokens()}, c.RunID, c.Token)
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("redisstore: ack %s: %w", c.RunID, store.ErrClaimLost)
	}
	return nil
}

// Release makes a claimed item pending again at the tail, or returns store.ErrClaimLost when
// c.Token no longer holds it.
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	res, err := s.runScript(ctx, "release "+c.RunID, scriptRelease,
		[]string{s.qPending(), s.qClaimed(), s.qTokens(), s.qSeq()}, c.RunID, c.Token)
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("redisstore: release %s: %w", c.RunID, store.ErrClaimLost)
	}
	return nil
}

// ReleaseClaimsOf makes every item claimed by pumpID pending again at the tail.
func (s *Store) ReleaseClaimsOf(ctx context.Context, pumpID string) (int, error) {
	res, err := s.runScript(ctx, "release claims of "+pumpID, scriptReleaseOwner,
		[]string{s.qPending(), s.qClaimed(), s.qTokens(), s.qSeq()}, pumpID+"/")
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
