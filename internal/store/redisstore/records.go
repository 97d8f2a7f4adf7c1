package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Tenants, scale-out requests and pipeline versions: plain records with small indexes.
func (s *Store) tenantKey(id string) string    { return s.k("tenant", id) }
func (s *Store) tenantsIndex() string          { return s.k("tenants") }
func (s *Store) scaleOutKey(id string) string  { return s.k("so", id) }
func (s *Store) scaleOutsIndex() string        { return s.k("sos") }
func (s *Store) pipelineKey(key string) string { return s.k("plv", key) }
func (s *Store) pipelinesLatest() string       { return s.k("pl", "latest") }

// PutTenant upserts tenant settings.
func (s *Store) PutTenant(ctx context.Context, t *messages.TenantSettings) error {
	id := t.GetTenantId()
	if id == "" {
		return fmt.Errorf("redisstore: put tenant: empty tenant_id")
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: put tenant %s: %w", id, err)
	}
	pb, err := marshal("tenant", t)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.tenantKey(id), pb, 0)
		p.SAdd(ctx, s.tenantsIndex(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: put tenant %s: %w", id, err)
	}
	return nil
}

// GetTenant returns the settings or store.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (*messages.TenantSettings, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get tenant %s: %w", id, err)
	}
	pb, err := s.rdb.Get(ctx, s.tenantKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get tenant %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get tenant %s: %w", id, err)
	}
	t := &messages.TenantSettings{}
	if err := unmarshal("tenant", pb, t); err != nil {
		return nil, err
	}
	return t, nil
}

// ListTenants returns every tenant ordered by id.
func (s *Store) ListTenants(ctx context.Context) ([]*messages.TenantSettings, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list tenants: %w", err)
	}
	ids, err := s.rdb.SMembers(ctx, s.tenantsIndex()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list tenants: %w", err)
	}
	sort.Strings(ids)
	out := make([]*messages.TenantSettings, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.tenantKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list tenants: %w", err)
	}
	for _, v := range vals {
		b, ok := asString(v)
		if !ok {
			continue
		}
		t := &messages.TenantSettings{}
		if err := unmarshal("tenant", []byte(b), t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// CreateScaleOut stores a new request (CreatedAt and UpdatedAt set when zero) or returns
// store.ErrExists.
func (s *Store) CreateScaleOut(ctx context.Context, r *messages.ScaleOutRequest) error {
	id := r.GetRequestId()
	if id == "" {
		return fmt.Errorf("redisstore: create scale-out: empty request_id")
	}
	x := proto.Clone(r).(*messages.ScaleOutRequest)
	now := s.now().UnixNano()
	if x.CreatedAt == 0 {
		x.CreatedAt = now
	}
	if x.UpdatedAt == 0 {
		x.UpdatedAt = now
	}
	pb, err := marshal("scale-out", x)
	if err != nil {
		return err
	}
	res, err := s.runScript(ctx, "create scale-out "+id, scriptCreateVersioned,
		[]string{s.scaleOutKey(id), s.scaleOutsIndex()}, pb, x.CreatedAt, id)
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("redisstore: create scale-out %s: %w", id, store.ErrExists)
	}
	return nil
}

// GetScaleOut returns the request or store.ErrNotFound.
func (s *Store) GetScaleOut(ctx context.Context, id string) (*messages.ScaleOutRequest, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get scale-out %s: %w", id, err)
	}
	pb, _, err := s.loadVersioned(ctx, s.scaleOutKey(id))
	if err != nil {
		return nil, fmt.Errorf("redisstore: get scale-out %s: %w", id, err)
	}
	r := &messages.ScaleOutRequest{}
	if err := unmarshal("scale-out", pb, r); err != nil {
		return nil, err
	}
	return r, nil
}

// UpdateScaleOut applies fn under an optimistic compare-and-set loop and sets UpdatedAt.
func (s *Store) UpdateScaleOut(ctx context.Context, id string, fn func(*messages.ScaleOutRequest) error) (*messages.ScaleOutRequest, error) {
	var out *messages.ScaleOutRequest
	err := s.updateVersioned(ctx, "update scale-out "+id, s.scaleOutKey(id), func(pb []byte) ([]byte, error) {
		r := &messages.ScaleOutRequest{}
		if err := unmarshal("scale-out", pb, r); err != nil {
			return nil, err
		}
		if err := fn(r); err != nil {
			return nil, err
		}
		r.UpdatedAt = s.now().UnixNano()
		out = r
		return marshal("scale-out", r)
	})
	if err != nil {
		return nil, err
	}
	return proto.Clone(out).(*messages.ScaleOutRequest), nil
}

// ListScaleOuts returns requests in any of statuses (all when empty), oldest first
// (CreatedAt, then id).
func (s *Store) ListScaleOuts(ctx context.Context, statuses ...string) ([]*messages.ScaleOutRequest, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list scale-outs: %w", err)
	}
	ids, err := s.rdb.ZRange(ctx, s.scaleOutsIndex(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list scale-outs: %w", err)
	}
	out := make([]*messages.ScaleOutRequest, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, s.scaleOutKey(id), "pb")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: list scale-outs: %w", err)
	}
	for _, c := range cmds {
		pb, err := c.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: list scale-outs: %w", err)
		}
		r := &messages.ScaleOutRequest{}
		if err := unmarshal("scale-out", pb, r); err != nil {
			return nil, err
		}
		if len(statuses) > 0 && !slices.Contains(statuses, r.Status) {
			continue
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].RequestId < out[j].RequestId
	})
	return out, nil
}

// PutPipeline stores a version (CreatedAt set when zero) and makes it its key's latest.
func (s *Store) PutPipeline(ctx context.Context, p *messages.PipelineVersion) error {
	if p.GetKey() == "" || p.GetHash() == "" {
		return fmt.Errorf("redisstore: put pipeline: empty key or hash")
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: put pipeline %s@%s: %w", p.Key, p.Hash, err)
	}
	x := proto.Clone(p).(*messages.PipelineVersion)
	if x.CreatedAt == 0 {
		x.CreatedAt = s.now().UnixNano()
	}
	pb, err := marshal("pipeline", x)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSet(ctx, s.pipelineKey(x.Key), x.Hash, pb)
		pipe.HSet(ctx, s.pipelinesLatest(), x.Key, x.Hash)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: put pipeline %s@%s: %w", x.Key, x.Hash, err)
	}
	return nil
}

// GetPipeline returns the key's latest version, or the version with hash when hash != "".
func (s *Store) GetPipeline(ctx context.Context, key, hash string) (*messages.PipelineVersion, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get pipeline %s: %w", key, err)
	}
	if hash == "" {
		h, err := s.rdb.HGet(ctx, s.pipelinesLatest(), key).Result()
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("redisstore: get pipeline %s: %w", key, store.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: get pipeline %s: %w", key, err)
		}
		hash = h
	}
	pb, err := s.rdb.HGet(ctx, s.pipelineKey(key), hash).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get pipeline %s@%s: %w", key, hash, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get pipeline %s@%s: %w", key, hash, err)
	}
	p := &messages.PipelineVersion{}
	if err := unmarshal("pipeline", pb, p); err != nil {
		return nil, err
	}
	return p, nil
}

// ListPipelines returns the latest version of every key, ordered by key.
func (s *Store) ListPipelines(ctx context.Context) ([]*messages.PipelineVersion, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: list pipelines: %w", err)
	}
	latest, err := s.rdb.HGetAll(ctx, s.pipelinesLatest()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list pipelines: %w", err)
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*messages.PipelineVersion, 0, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGet(ctx, s.pipelineKey(k), latest[k])
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: list pipelines: %w", err)
	}
	for _, c := range cmds {
		pb, err := c.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: list pipelines: %w", err)
		}
		p := &messages.PipelineVersion{}
		if err := unmarshal("pipeline", pb, p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
