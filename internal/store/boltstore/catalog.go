package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// PutTenant upserts t.
func (s *Store) PutTenant(ctx context.Context, t *messages.TenantSettings) error {
	id := t.GetTenantId()
	if id == "" {
		return errors.New("boltstore: put tenant: empty id")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error { return put(tx, bTenants, []byte(id), t) })
	return wrap("put tenant", id, err)
}

// GetTenant returns the tenant or store.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (*messages.TenantSettings, error) {
	t := &messages.TenantSettings{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return getFound(tx, bTenants, []byte(id), t)
	})
	if err != nil {
		return nil, wrap("get tenant", id, err)
	}
	return t, nil
}

// ListTenants returns every tenant by id.
func (s *Store) ListTenants(ctx context.Context) ([]*messages.TenantSettings, error) {
	out := []*messages.TenantSettings{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bTenants).ForEach(func(k, v []byte) error {
			t := &messages.TenantSettings{}
			if err := proto.Unmarshal(v, t); err != nil {
				return fmt.Errorf("decode tenant %s: %w", k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list tenants", "", err)
	}
	return out, nil
}

// CreateScaleOut stores r or returns store.ErrExists. CreatedAt/UpdatedAt default to now.
func (s *Store) CreateScaleOut(ctx context.Context, r *messages.ScaleOutRequest) error {
	id := r.GetRequestId()
	if id == "" {
		return errors.New("boltstore: create scale-out: empty id")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bScaleOuts).Get([]byte(id)) != nil {
			return fmt.Errorf("boltstore: create scale-out %s: %w", id, store.ErrExists)
		}
		c := proto.Clone(r).(*messages.ScaleOutRequest)
		now := s.nowNanos()
		if c.CreatedAt == 0 {
			c.CreatedAt = now
		}
		if c.UpdatedAt == 0 {
			c.UpdatedAt = now
		}
		return put(tx, bScaleOuts, []byte(id), c)
	})
	return wrap("create scale-out", id, err)
}

// GetScaleOut returns the request or store.ErrNotFound.
func (s *Store) GetScaleOut(ctx context.Context, id string) (*messages.ScaleOutRequest, error) {
	r := &messages.ScaleOutRequest{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return getFound(tx, bScaleOuts, []byte(id), r)
	})
	if err != nil {
		return nil, wrap("get scale-out", id, err)
	}
	return r, nil
}

// UpdateScaleOut applies fn in one write transaction and sets UpdatedAt. fn may run more than
// once; its error is returned as is.
func (s *Store) UpdateScaleOut(ctx context.Context, id string, fn func(*messages.ScaleOutRequest) error) (*messages.ScaleOutRequest, error) {
	var out *messages.ScaleOutRequest
	var fnErr error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out, fnErr = nil, nil
		r := &messages.ScaleOutRequest{}
		ok, err := get(tx, bScaleOuts, []byte(id), r)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("boltstore: update scale-out %s: %w", id, store.ErrNotFound)
		}
		if err := fn(r); err != nil {
			fnErr = err
			return err
		}
		r.RequestId, r.UpdatedAt = id, s.nowNanos()
		if err := put(tx, bScaleOuts, []byte(id), r); err != nil {
			return err
		}
		out = r
		return nil
	})
	if fnErr != nil && err == fnErr {
		return nil, err
	}
	if err != nil {
		return nil, wrap("update scale-out", id, err)
	}
	return out, nil
}

// ListScaleOuts returns requests in any of statuses (all when empty), oldest first.
func (s *Store) ListScaleOuts(ctx context.Context, statuses ...string) ([]*messages.ScaleOutRequest, error) {
	out := []*messages.ScaleOutRequest{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bScaleOuts).ForEach(func(k, v []byte) error {
			r := &messages.ScaleOutRequest{}
			if err := proto.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decode scale-out %s: %w", k, err)
			}
			if len(statuses) == 0 || slices.Contains(statuses, r.GetStatus()) {
				out = append(out, r)
			}
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list scale-outs", "", err)
	}
	slices.SortStableFunc(out, func(a, b *messages.ScaleOutRequest) int {
		if c := a.GetCreatedAt() - b.GetCreatedAt(); c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		return 0 // ForEach already ordered them by id
	})
	return out, nil
}

// PutPipeline stores p (CreatedAt defaults to now) and makes it its key's latest.
func (s *Store) PutPipeline(ctx context.Context, p *messages.PipelineVersion) error {
	if p.GetKey() == "" || p.GetHash() == "" {
		return errors.New("boltstore: put pipeline: empty key or hash")
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		c := proto.Clone(p).(*messages.PipelineVersion)
		if c.CreatedAt == 0 {
			c.CreatedAt = s.nowNanos()
		}
		if err := put(tx, bPipelines, key(c.Key, c.Hash), c); err != nil {
			return err
		}
		return tx.Bucket(bPipelinesLast).Put([]byte(c.Key), []byte(c.Hash))
	})
	return wrap("put pipeline", p.GetKey(), err)
}

// GetPipeline returns key's latest version, or the version hash when hash != "".
func (s *Store) GetPipeline(ctx context.Context, pkey, hash string) (*messages.PipelineVersion, error) {
	p := &messages.PipelineVersion{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		h := hash
		if h == "" {
			h = string(tx.Bucket(bPipelinesLast).Get([]byte(pkey)))
			if h == "" {
				return store.ErrNotFound
			}
		}
		return getFound(tx, bPipelines, key(pkey, h), p)
	})
	if err != nil {
		return nil, wrap("get pipeline", pkey+"@"+hash, err)
	}
	return p, nil
}

// ListPipelines returns the latest version of every key, by key.
func (s *Store) ListPipelines(ctx context.Context) ([]*messages.PipelineVersion, error) {
	out := []*messages.PipelineVersion{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bPipelinesLast).ForEach(func(k, h []byte) error {
			p := &messages.PipelineVersion{}
			ok, err := get(tx, bPipelines, key(string(k), string(h)), p)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, p)
			}
			return nil
		})
	})
	if err != nil {
		return nil, wrap("list pipelines", "", err)
	}
	return out, nil
}

// AppendUsage stores events (At defaults to now) in one transaction.
func (s *Store) AppendUsage(ctx context.Context, events ...*messages.UsageEvent) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		now := s.nowNanos()
		for _, e := range events {
			if err := putUsage(tx, now, e); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap("append usage", "", err)
}

// putUsage stores a copy of e in tx (At defaults to now).
func putUsage(tx *bolt.Tx, now int64, e *messages.UsageEvent) error {
	c := proto.Clone(e).(*messages.UsageEvent)
	if c.At == 0 {
		c.At = now
	}
	seq, err := tx.Bucket(bUsage).NextSequence()
	if err != nil {
		return fmt.Errorf("usage sequence: %w", err)
	}
	return put(tx, bUsage, concat(orderedTime(c.At), u64(seq)), c)
}

// meterCommit stores the usage event of a written commit in tx unless its mark was already
// metered (a replay of the same commit).
func meterCommit(tx *bolt.Tx, now int64, c store.StepCommit) error {
	if c.Usage == nil {
		return nil
	}
	marks := tx.Bucket(bUsageMarks)
	k := key(c.ExecutionID, store.UsageMark(c))
	if marks.Get(k) != nil {
		return nil
	}
	if err := marks.Put(k, []byte{}); err != nil {
		return fmt.Errorf("usage mark: %w", err)
	}
	return putUsage(tx, now, c.Usage)
}

// ListUsage returns events of f.TenantID (all when empty) with At in [From, To), by At.
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]*messages.UsageEvent, error) {
	out := []*messages.UsageEvent{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bUsage).Cursor()
		fromNs, toNs := f.Nanos()
		var k, v []byte
		if fromNs == math.MinInt64 {
			k, v = c.First()
		} else {
			k, v = c.Seek(orderedTime(fromNs))
		}
		var to []byte
		if toNs != math.MaxInt64 {
			to = orderedTime(toNs)
		}
		for ; k != nil && (to == nil || bytes.Compare(k[:8], to) < 0); k, v = c.Next() {
			e := &messages.UsageEvent{}
			if err := proto.Unmarshal(v, e); err != nil {
				return fmt.Errorf("decode usage: %w", err)
			}
			if f.TenantID == "" || e.GetTenantId() == f.TenantID {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list usage", f.TenantID, err)
	}
	return out, nil
}
