package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Tenant lifecycle state is one string key per tenant. Instance records are one string key per
// record, indexed by a set of all record ids and a set per tenant.
func (s *Store) tenantStateKey(id string) string      { return s.k("tstate", id) }
func (s *Store) instRecordKey(id string) string       { return s.k("irec", id) }
func (s *Store) instRecordsIndex() string             { return s.k("irecs") }
func (s *Store) instRecordsByTenant(id string) string { return s.k("irecs", "t", id) }

// PutTenantState upserts st.
func (s *Store) PutTenantState(ctx context.Context, st *messages.TenantState) error {
	id := st.GetTenantId()
	if id == "" {
		return errors.New("redisstore: put tenant state: empty tenant_id")
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: put tenant state %s: %w", id, err)
	}
	pb, err := marshal("tenant state", st)
	if err != nil {
		return err
	}
	if err := s.rdb.Set(ctx, s.tenantStateKey(id), pb, 0).Err(); err != nil {
		return fmt.Errorf("redisstore: put tenant state %s: %w", id, err)
	}
	return nil
}

// GetTenantState returns the state or store.ErrNotFound.
func (s *Store) GetTenantState(ctx context.Context, tenantID string) (*messages.TenantState, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get tenant state %s: %w", tenantID, err)
	}
	pb, err := s.rdb.Get(ctx, s.tenantStateKey(tenantID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get tenant state %s: %w", tenantID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get tenant state %s: %w", tenantID, err)
	}
	st := &messages.TenantState{}
	if err := unmarshal("tenant state", pb, st); err != nil {
		return nil, err
	}
	return st, nil
}

// PutInstanceRecord upserts r and indexes it. CreatedAt defaults to now. A record that moved
// to another tenant is removed from the old tenant's index.
func (s *Store) PutInstanceRecord(ctx context.Context, r *messages.InstanceRecord) error {
	id := r.GetRuntimeInstanceId()
	if id == "" {
		return errors.New("redisstore: put instance record: empty runtime_instance_id")
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: put instance record %s: %w", id, err)
	}
	c := proto.Clone(r).(*messages.InstanceRecord)
	if c.CreatedAt == 0 {
		c.CreatedAt = s.now().UnixNano()
	}
	pb, err := marshal("instance record", c)
	if err != nil {
		return err
	}
	old, err := s.GetInstanceRecord(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if old != nil && old.TenantId != c.TenantId {
			p.SRem(ctx, s.instRecordsByTenant(old.TenantId), id)
		}
		p.Set(ctx, s.instRecordKey(id), pb, 0)
		p.SAdd(ctx, s.instRecordsIndex(), id)
		p.SAdd(ctx, s.instRecordsByTenant(c.TenantId), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: put instance record %s: %w", id, err)
	}
	return nil
}

// GetInstanceRecord returns the record or store.ErrNotFound.
func (s *Store) GetInstanceRecord(ctx context.Context, id string) (*messages.InstanceRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get instance record %s: %w", id, err)
	}
	pb, err := s.rdb.Get(ctx, s.instRecordKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get instance record %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get instance record %s: %w", id, err)
	}
	r := &messages.InstanceRecord{}
	if err := unmarshal("instance record", pb, r); err != nil {
		return nil, err
	}
	return r, nil
}

// ListInstanceRecords returns the records of tenantID ("" = all) ordered by id.
func (s *Store) ListInstanceRecords(ctx context.Context, tenantID string) ([]*messages.InstanceRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list instance records: %w", err)
	}
	index := s.instRecordsIndex()
	if tenantID != "" {
		index = s.instRecordsByTenant(tenantID)
	}
	ids, err := s.rdb.SMembers(ctx, index).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list instance records: %w", err)
	}
	sort.Strings(ids)
	out := make([]*messages.InstanceRecord, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.instRecordKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list instance records: %w", err)
	}
	for _, v := range vals {
		b, ok := asString(v)
		if !ok {
			continue // deleted between SMEMBERS and MGET
		}
		r := &messages.InstanceRecord{}
		if err := unmarshal("instance record", []byte(b), r); err != nil {
			return nil, err
		}
		if tenantID != "" && r.TenantId != tenantID {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// DeleteInstanceRecord removes a record and its index entries; a missing id is not an error.
func (s *Store) DeleteInstanceRecord(ctx context.Context, id string) error {
	old, err := s.GetInstanceRecord(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.instRecordKey(id))
		p.SRem(ctx, s.instRecordsIndex(), id)
		p.SRem(ctx, s.instRecordsByTenant(old.TenantId), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: delete instance record %s: %w", id, err)
	}
	return nil
}
