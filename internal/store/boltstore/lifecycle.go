package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// PutTenantState upserts s.
func (s *Store) PutTenantState(ctx context.Context, st *messages.TenantState) error {
	id := st.GetTenantId()
	if id == "" {
		return errors.New("boltstore: put tenant state: empty id")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error { return put(tx, bTenantStates, []byte(id), st) })
	return wrap("put tenant state", id, err)
}

// GetTenantState returns the state or store.ErrNotFound.
func (s *Store) GetTenantState(ctx context.Context, tenantID string) (*messages.TenantState, error) {
	st := &messages.TenantState{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return getFound(tx, bTenantStates, []byte(tenantID), st)
	})
	if err != nil {
		return nil, wrap("get tenant state", tenantID, err)
	}
	return st, nil
}

// PutInstanceRecord upserts r and indexes it by tenant. CreatedAt defaults to now.
func (s *Store) PutInstanceRecord(ctx context.Context, r *messages.InstanceRecord) error {
	id := r.GetRuntimeInstanceId()
	if id == "" {
		return errors.New("boltstore: put instance record: empty id")
	}
	c := proto.Clone(r).(*messages.InstanceRecord)
	if c.CreatedAt == 0 {
		c.CreatedAt = s.nowNanos()
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old := &messages.InstanceRecord{}
		ok, err := get(tx, bInstRecords, []byte(id), old)
		if err != nil {
			return err
		}
		if ok && old.TenantId != c.TenantId {
			if err := tx.Bucket(bInstRecByTen).Delete(key(old.TenantId, id)); err != nil {
				return fmt.Errorf("unindex instance record: %w", err)
			}
		}
		if err := tx.Bucket(bInstRecByTen).Put(key(c.TenantId, id), nil); err != nil {
			return fmt.Errorf("index instance record: %w", err)
		}
		return put(tx, bInstRecords, []byte(id), c)
	})
	return wrap("put instance record", id, err)
}

// GetInstanceRecord returns the record or store.ErrNotFound.
func (s *Store) GetInstanceRecord(ctx context.Context, id string) (*messages.InstanceRecord, error) {
	r := &messages.InstanceRecord{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return getFound(tx, bInstRecords, []byte(id), r)
	})
	if err != nil {
		return nil, wrap("get instance record", id, err)
	}
	return r, nil
}

// ListInstanceRecords returns the records of tenantID ("" = all) ordered by id.
func (s *Store) ListInstanceRecords(ctx context.Context, tenantID string) ([]*messages.InstanceRecord, error) {
	out := []*messages.InstanceRecord{}
	decode := func(k, v []byte) error {
		r := &messages.InstanceRecord{}
		if err := proto.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode instance record %s: %w", k, err)
		}
		out = append(out, r)
		return nil
	}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		recs := tx.Bucket(bInstRecords)
		if tenantID == "" {
			return recs.ForEach(decode)
		}
		p := prefix(tenantID)
		c := tx.Bucket(bInstRecByTen).Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			id := k[len(p):]
			if v := recs.Get(id); v != nil {
				if err := decode(id, v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list instance records", tenantID, err)
	}
	return out, nil
}

// DeleteInstanceRecord removes a record and its index entry; a missing id is not an error.
func (s *Store) DeleteInstanceRecord(ctx context.Context, id string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		old := &messages.InstanceRecord{}
		ok, err := get(tx, bInstRecords, []byte(id), old)
		if err != nil || !ok {
			return err
		}
		if err := tx.Bucket(bInstRecByTen).Delete(key(old.TenantId, id)); err != nil {
			return fmt.Errorf("unindex instance record: %w", err)
		}
		if err := tx.Bucket(bInstRecords).Delete([]byte(id)); err != nil {
			return fmt.Errorf("delete instance record: %w", err)
		}
		return nil
	})
	return wrap("delete instance record", id, err)
}
