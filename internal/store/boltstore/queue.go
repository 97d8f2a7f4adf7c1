package boltstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dairuntime/dair/internal/store"
)

// queueItem is the state of one queue entry: pending at seq, or claimed until deadline.
type queueItem struct {
	claimed  bool
	at       int64 // pending: sequence; claimed: deadline (ns)
	seq      int64 // claimed: the sequence it was pending at (0: unknown, a claim of an older store)
	token    string
	indexKey []byte // key in queue_pending or queue_claims
}

// Encoded queue items: a flag byte (0 pending, 1 claimed, 2 claimed with its sequence), at,
// for flag 2 the sequence, then the token.
func (q queueItem) encode() []byte {
	b := make([]byte, 0, 17+len(q.token))
	switch {
	case q.claimed && q.seq != 0:
		b = append(append(b, 2), orderedTime(q.at)...)
		b = append(b, orderedTime(q.seq)...)
	case q.claimed:
		b = append(append(b, 1), orderedTime(q.at)...)
	default:
		b = append(append(b, 0), orderedTime(q.at)...)
	}
	return append(b, q.token...)
}

func decodeQueueItem(runID string, v []byte) (queueItem, error) {
	if len(v) < 9 || (v[0] == 2 && len(v) < 17) {
		return queueItem{}, fmt.Errorf("decode queue item %s: short value", runID)
	}
	q := queueItem{claimed: v[0] != 0, at: decodeTime(v[1:9]), token: string(v[9:])}
	if v[0] == 2 {
		q.seq, q.token = decodeTime(v[9:17]), string(v[17:])
	}
	q.indexKey = concat(v[1:9], []byte(runID))
	return q, nil
}

// makePending puts runID at the tail of the pending order, and of its tenant's.
func makePending(tx *bolt.Tx, runID string) error { return makePendingAt(tx, runID, 0) }

// makePendingAt puts runID at sequence seq of the pending order, and of its tenant's: back in
// the place it was claimed from, so a released run does not lose its turn to the runs queued
// after it; at the tail when seq is 0 (a negative seq is ahead of every tail one).
func makePendingAt(tx *bolt.Tx, runID string, seq int64) error {
	pending := tx.Bucket(bQueuePending)
	if seq == 0 {
		next, err := pending.NextSequence()
		if err != nil {
			return fmt.Errorf("queue sequence: %w", err)
		}
		seq = int64(next)
	}
	q := queueItem{at: seq}
	if err := tx.Bucket(bQueueItems).Put([]byte(runID), q.encode()); err != nil {
		return fmt.Errorf("enqueue %s: %w", runID, err)
	}
	if err := pending.Put(concat(orderedTime(q.at), []byte(runID)), nil); err != nil {
		return fmt.Errorf("enqueue %s: %w", runID, err)
	}
	return tenantPending(tx, runID, q.at, true)
}

// loadQueueItem returns the item of runID, or ok=false.
func loadQueueItem(tx *bolt.Tx, runID string) (queueItem, bool, error) {
	v := tx.Bucket(bQueueItems).Get([]byte(runID))
	if v == nil {
		return queueItem{}, false, nil
	}
	q, err := decodeQueueItem(runID, v)
	return q, err == nil, err
}

// unindex removes the item's pending or claim index entry.
func unindex(tx *bolt.Tx, q queueItem) error {
	b := bQueuePending
	if q.claimed {
		b = bQueueClaims
	}
	if err := tx.Bucket(b).Delete(q.indexKey); err != nil {
		return fmt.Errorf("unindex queue item: %w", err)
	}
	if q.claimed {
		return nil
	}
	return tenantPending(tx, string(q.indexKey[8:]), decodeTime(q.indexKey), false)
}

// newToken returns a random claim token for pumpID: "<pumpID>/<random>", so the claims of a
// dead pump can be found (ReleaseClaimsOf).
func newToken(pumpID string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	return pumpID + "/" + hex.EncodeToString(b[:]), nil
}

// Enqueue makes runID pending in its tenant's queue (read from the run); a pending or claimed
// run is left alone.
func (s *Store) Enqueue(ctx context.Context, runID string) error {
	return s.enqueue(ctx, nil, runID, false)
}

// EnqueueFront makes runID pending ahead of every pending item. See store.Queue.
func (s *Store) EnqueueFront(ctx context.Context, runID string) error {
	return s.enqueue(ctx, nil, runID, true)
}

// enqueue files runID under *tenant, or the run's tenant when tenant is nil, at the tail or
// (front) ahead of every item: at a negative sequence counted by the items bucket.
func (s *Store) enqueue(ctx context.Context, tenant *string, runID string, front bool) error {
	if runID == "" {
		return errors.New("boltstore: enqueue: empty run id")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bQueueItems).Get([]byte(runID)) != nil {
			return nil
		}
		t, err := queueTenant(tx, tenant, runID)
		if err != nil {
			return err
		}
		if err := fileTenant(tx, runID, t); err != nil {
			return err
		}
		if front {
			next, err := tx.Bucket(bQueueItems).NextSequence()
			if err != nil {
				return fmt.Errorf("queue front sequence: %w", err)
			}
			return makePendingAt(tx, runID, -int64(next))
		}
		return makePending(tx, runID)
	})
	return wrap("enqueue", runID, err)
}

// Claim reclaims timed-out claims, then claims up to max oldest pending items for visibility.
func (s *Store) Claim(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]store.Claim, error) {
	if max <= 0 {
		return []store.Claim{}, nil
	}
	// Most polls find nothing: answer those from a read transaction without a write.
	now := s.nowNanos()
	idle := true
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bQueuePending).Cursor().First(); k != nil {
			idle = false
		}
		if k, _ := tx.Bucket(bQueueClaims).Cursor().First(); k != nil && decodeTime(k) <= now {
			idle = false
		}
		return nil
	})
	if err != nil || idle {
		return []store.Claim{}, wrap("claim", pumpID, err)
	}
	var out []store.Claim
	err = s.update(ctx, func(tx *bolt.Tx) error {
		out = []store.Claim{}
		now := s.nowNanos()
		if err := reclaimExpired(tx, now); err != nil {
			return err
		}
		var runIDs []string
		c := tx.Bucket(bQueuePending).Cursor()
		for k, _ := c.First(); k != nil && len(runIDs) < max; k, _ = c.Next() {
			runIDs = append(runIDs, string(k[8:]))
		}
		claimed, err := claimItems(tx, pumpID, runIDs, now, visibility)
		out = append(out, claimed...)
		return err
	})
	if err != nil {
		return nil, wrap("claim", pumpID, err)
	}
	return out, nil
}

// claimItems claims the pending items runIDs for pumpID until now+visibility.
func claimItems(tx *bolt.Tx, pumpID string, runIDs []string, now int64, visibility time.Duration) ([]store.Claim, error) {
	out := make([]store.Claim, 0, len(runIDs))
	for _, runID := range runIDs {
		q, ok, err := loadQueueItem(tx, runID)
		if err != nil {
			return nil, err
		}
		if !ok || q.claimed {
			continue
		}
		if err := unindex(tx, q); err != nil {
			return nil, err
		}
		token, err := newToken(pumpID)
		if err != nil {
			return nil, err
		}
		q = queueItem{claimed: true, at: deadline(now, visibility), seq: q.at, token: token}
		if err := tx.Bucket(bQueueItems).Put([]byte(runID), q.encode()); err != nil {
			return nil, fmt.Errorf("claim %s: %w", runID, err)
		}
		if err := tx.Bucket(bQueueClaims).Put(concat(orderedTime(q.at), []byte(runID)), nil); err != nil {
			return nil, fmt.Errorf("claim %s: %w", runID, err)
		}
		out = append(out, store.Claim{RunID: runID, Token: token})
	}
	return out, nil
}

// reclaimExpired makes every claim whose deadline is not after now pending again.
func reclaimExpired(tx *bolt.Tx, now int64) error {
	claims := tx.Bucket(bQueueClaims)
	var expired [][]byte
	c := claims.Cursor()
	for k, _ := c.First(); k != nil && decodeTime(k) <= now; k, _ = c.Next() {
		expired = append(expired, concat(nil, k))
	}
	for _, k := range expired {
		if err := claims.Delete(k); err != nil {
			return fmt.Errorf("reclaim: %w", err)
		}
		runID := string(k[8:])
		q, _, err := loadQueueItem(tx, runID)
		if err != nil {
			return err
		}
		if err := makePendingAt(tx, runID, q.seq); err != nil {
			return err
		}
	}
	return nil
}

// checkClaim loads c's item and returns ErrClaimLost unless c.Token holds it.
func checkClaim(tx *bolt.Tx, c store.Claim) (queueItem, error) {
	q, ok, err := loadQueueItem(tx, c.RunID)
	if err != nil {
		return q, err
	}
	if !ok || !q.claimed || q.token != c.Token {
		return q, fmt.Errorf("boltstore: claim %s: %w", c.RunID, store.ErrClaimLost)
	}
	return q, nil
}

// Ack removes c's item, or returns store.ErrClaimLost.
func (s *Store) Ack(ctx context.Context, c store.Claim) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		q, err := checkClaim(tx, c)
		if err != nil {
			return err
		}
		if err := unindex(tx, q); err != nil {
			return err
		}
		if err := tx.Bucket(bQueueItems).Delete([]byte(c.RunID)); err != nil {
			return fmt.Errorf("ack %s: %w", c.RunID, err)
		}
		return unfileTenant(tx, c.RunID)
	})
	return wrap("ack", c.RunID, err)
}

// Release makes c's item pending again at its place, or returns store.ErrClaimLost.
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		q, err := checkClaim(tx, c)
		if err != nil {
			return err
		}
		if err := unindex(tx, q); err != nil {
			return err
		}
		return makePendingAt(tx, c.RunID, q.seq)
	})
	return wrap("release", c.RunID, err)
}

// ReleaseClaimsOf makes every item claimed by pumpID pending again at its place.
func (s *Store) ReleaseClaimsOf(ctx context.Context, pumpID string) (int, error) {
	n := 0
	prefix := pumpID + "/"
	err := s.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		var runIDs []string
		c := tx.Bucket(bQueueClaims).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			runIDs = append(runIDs, string(k[8:]))
		}
		for _, runID := range runIDs {
			q, ok, err := loadQueueItem(tx, runID)
			if err != nil {
				return err
			}
			if !ok || !q.claimed || !strings.HasPrefix(q.token, prefix) {
				continue
			}
			if err := unindex(tx, q); err != nil {
				return err
			}
			if err := makePendingAt(tx, runID, q.seq); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, wrap("release claims of", pumpID, err)
}

// QueueDepth returns the pending and claimed counts.
func (s *Store) QueueDepth(ctx context.Context) (int64, int64, error) {
	var pending, claimed int64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		pending = int64(tx.Bucket(bQueuePending).Stats().KeyN)
		claimed = int64(tx.Bucket(bQueueClaims).Stats().KeyN)
		return nil
	})
	return pending, claimed, wrap("queue depth", "", err)
}
