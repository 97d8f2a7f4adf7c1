package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// PutInstance upserts d with a deadline of now+ttl.
func (s *Store) PutInstance(ctx context.Context, d *messages.CapacityDescriptor, ttl time.Duration) error {
	id := d.GetRuntimeInstanceId()
	if id == "" {
		return errors.New("boltstore: put instance: empty id")
	}
	v, err := proto.Marshal(d)
	if err != nil {
		return fmt.Errorf("boltstore: put instance %s: %w", id, err)
	}
	// A descriptor is published after every change of load and on every heartbeat, and nothing
	// waits for it to land: it shares the transaction of the next urgent write (an assignment,
	// an execution's start) instead of putting one of its own in front of it.
	err = s.updateDeferred(ctx, func(tx *bolt.Tx) error {
		now := s.nowNanos()
		if node := d.GetNodeId(); node != "" {
			l := tx.Bucket(bLeases).Get([]byte(store.TombstoneLease(node)))
			if len(l) >= 8 && decodeTime(l) > now && strings.HasPrefix(string(l[8:]), store.TombstoneHolderPrefix) {
				return fmt.Errorf("boltstore: put instance %s of member %s: %w", id, node, store.ErrMemberDead)
			}
		}
		return tx.Bucket(bInstances).Put([]byte(id), concat(orderedTime(deadline(now, ttl)), v))
	})
	return wrap("put instance", id, err)
}

// decodeInstance returns the descriptor in v, or nil when it expired at now.
func decodeInstance(v []byte, now int64) (*messages.CapacityDescriptor, error) {
	if len(v) < 8 {
		return nil, errors.New("decode instance: short value")
	}
	if decodeTime(v) <= now {
		return nil, nil
	}
	d := &messages.CapacityDescriptor{}
	if err := proto.Unmarshal(v[8:], d); err != nil {
		return nil, fmt.Errorf("decode instance: %w", err)
	}
	return d, nil
}

// GetInstance returns a live descriptor or store.ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, id string) (*messages.CapacityDescriptor, error) {
	var d *messages.CapacityDescriptor
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bInstances).Get([]byte(id))
		if v == nil {
			return store.ErrNotFound
		}
		var err error
		if d, err = decodeInstance(v, s.nowNanos()); err == nil && d == nil {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, wrap("get instance", id, err)
	}
	return d, nil
}

// ListInstances returns the live descriptors ordered by id.
func (s *Store) ListInstances(ctx context.Context) ([]*messages.CapacityDescriptor, error) {
	out := []*messages.CapacityDescriptor{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		now := s.nowNanos()
		return tx.Bucket(bInstances).ForEach(func(k, v []byte) error {
			d, err := decodeInstance(v, now)
			if err != nil {
				return fmt.Errorf("instance %s: %w", k, err)
			}
			if d != nil {
				out = append(out, d)
			}
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list instances", "", err)
	}
	return out, nil
}

// DeleteInstance removes id; a missing id is not an error.
func (s *Store) DeleteInstance(ctx context.Context, id string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error { return tx.Bucket(bInstances).Delete([]byte(id)) })
	return wrap("delete instance", id, err)
}

// Reserve holds a slot of instanceID for runID in one write transaction (see store.Reservations).
func (s *Store) Reserve(ctx context.Context, instanceID, runID string, limit int, ttl time.Duration) (bool, error) {
	var ok bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		ok, _, err = holdSlot(tx, s.nowNanos(), instanceID, runID, limit, ttl)
		return err
	})
	if err != nil {
		return false, wrap("reserve", instanceID+"/"+runID, err)
	}
	return ok, nil
}

// holdSlot drops the expired holds of instanceID, then holds a slot for runID until now+ttl if
// it holds one already or fewer than limit live holds exist. It returns whether it holds one
// and the live holds after the call.
func holdSlot(tx *bolt.Tx, now int64, instanceID, runID string, limit int, ttl time.Duration) (bool, int, error) {
	b := tx.Bucket(bReservations)
	pre := prefix(instanceID)
	mine := key(instanceID, runID)
	var expired [][]byte
	live, held := 0, false
	c := b.Cursor()
	for k, v := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre); k, v = c.Next() {
		switch {
		case decodeTime(v) <= now:
			expired = append(expired, concat(nil, k))
		case bytes.Equal(k, mine):
			held = true
			live++
		default:
			live++
		}
	}
	for _, k := range expired {
		if err := b.Delete(k); err != nil {
			return false, live, fmt.Errorf("drop expired hold: %w", err)
		}
	}
	if !held && live >= limit {
		return false, live, nil
	}
	if !held {
		live++
	}
	return true, live, b.Put(mine, orderedTime(deadline(now, ttl)))
}

// RefreshReservations extends the live holds of runIDs on instanceID to now+ttl.
func (s *Store) RefreshReservations(ctx context.Context, instanceID string, runIDs []string, ttl time.Duration) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bReservations)
		now := s.nowNanos()
		for _, runID := range runIDs {
			k := key(instanceID, runID)
			if v := b.Get(k); v == nil || decodeTime(v) <= now {
				continue
			}
			if err := b.Put(k, orderedTime(deadline(now, ttl))); err != nil {
				return fmt.Errorf("refresh %s: %w", runID, err)
			}
			if th := tenantHold(tx, instanceID, runID); th != nil && b.Get(th) != nil {
				if err := b.Put(th, orderedTime(deadline(now, ttl))); err != nil {
					return fmt.Errorf("refresh tenant hold of %s: %w", runID, err)
				}
			}
		}
		return nil
	})
	return wrap("refresh reservations", instanceID, err)
}

// ReleaseReservation drops the hold of runID on instanceID, and the tenant hold that follows
// it (see ReserveForTenant).
func (s *Store) ReleaseReservation(ctx context.Context, instanceID, runID string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error { return releaseHold(tx, instanceID, runID) })
	return wrap("release reservation", instanceID+"/"+runID, err)
}

// releaseHold drops the hold of runID on instanceID and the tenant hold that follows it.
func releaseHold(tx *bolt.Tx, instanceID, runID string) error {
	if th := tenantHold(tx, instanceID, runID); th != nil {
		if err := tx.Bucket(bReservations).Delete(th); err != nil {
			return err
		}
		if err := tx.Bucket(bHoldOf).Delete([]byte(runID)); err != nil {
			return err
		}
	}
	return tx.Bucket(bReservations).Delete(key(instanceID, runID))
}

// ReservationExpiries returns when each of runIDs' live hold on instanceID lapses (zero: none),
// in one read transaction.
func (s *Store) ReservationExpiries(ctx context.Context, instanceID string, runIDs []string) ([]time.Time, error) {
	out := make([]time.Time, len(runIDs))
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, now := tx.Bucket(bReservations), s.nowNanos()
		for i, id := range runIDs {
			if v := b.Get(key(instanceID, id)); len(v) >= 8 && decodeTime(v) > now {
				out[i] = time.Unix(0, decodeTime(v))
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("reservations", instanceID, err)
	}
	return out, nil
}

// ReservationCount returns the number of live holds on instanceID.
func (s *Store) ReservationCount(ctx context.Context, instanceID string) (int, error) {
	n := 0
	err := s.view(ctx, func(tx *bolt.Tx) error {
		now := s.nowNanos()
		pre := prefix(instanceID)
		c := tx.Bucket(bReservations).Cursor()
		for k, v := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre); k, v = c.Next() {
			if decodeTime(v) > now {
				n++
			}
		}
		return nil
	})
	return n, wrap("reservation count", instanceID, err)
}

// AcquireLease takes or renews name for holder when it is free, expired or already holder's.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	var ok bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		ok = false
		b := tx.Bucket(bLeases)
		now := s.nowNanos()
		if v := b.Get([]byte(name)); len(v) >= 8 && decodeTime(v) > now && string(v[8:]) != holder {
			return nil
		}
		ok = true
		return b.Put([]byte(name), concat(orderedTime(deadline(now, ttl)), []byte(holder)))
	})
	if err != nil {
		return false, wrap("acquire lease", name, err)
	}
	return ok, nil
}

var _ store.LeaseReader = (*Store)(nil)

// LeaseExpiry returns when name's lease lapses and its holder, or the zero time and "" when it
// is free. See store.LeaseReader.
func (s *Store) LeaseExpiry(ctx context.Context, name string) (time.Time, string, error) {
	var (
		until  time.Time
		holder string
	)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bLeases).Get([]byte(name)); len(v) >= 8 && decodeTime(v) > s.nowNanos() {
			until, holder = time.Unix(0, decodeTime(v)), string(v[8:])
		}
		return nil
	})
	if err != nil {
		return time.Time{}, "", wrap("read lease", name, err)
	}
	return until, holder, nil
}

// ReleaseLease drops name when holder holds it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bLeases)
		if v := b.Get([]byte(name)); len(v) >= 8 && string(v[8:]) == holder {
			return b.Delete([]byte(name))
		}
		return nil
	})
	return wrap("release lease", name, err)
}
