package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/ttlcache"
	"github.com/dairuntime/dair/messages"
)

// pipelineCache holds parsed pipelines by content hash, loading misses from the store. It is
// goroutine-safe; its methods block on store I/O on a miss.
type pipelineCache struct {
	st       store.Pipelines
	handlers *step.Registry
	mu       sync.RWMutex // guards byHash
	byHash   map[string]*compiled
	// latest caches each key's latest hash for a second (puts on this node update it).
	latest *ttlcache.Cache[string]
}

// compiled is a validated pipeline and its graph. It is immutable once built.
type compiled struct {
	p *dag.Pipeline
	g *dag.Graph
}

func newPipelineCache(st store.Pipelines, h *step.Registry) *pipelineCache {
	return &pipelineCache{st: st, handlers: h, byHash: make(map[string]*compiled), latest: ttlcache.New[string](time.Second)}
}

// put parses, validates and stores a pipeline definition and returns it compiled.
func (c *pipelineCache) put(ctx context.Context, src []byte) (*compiled, error) {
	p, err := dag.Load(src, c.handlers.Has)
	if err != nil {
		return nil, err
	}
	if err := dag.CheckSource(src); err != nil {
		return nil, err
	}
	if err := dag.CheckWith(p, c.handlers.CheckWith); err != nil {
		return nil, err
	}
	g, err := dag.Compile(p)
	if err != nil {
		return nil, err
	}
	if err := c.st.PutPipeline(ctx, &messages.PipelineVersion{Key: p.Key, Hash: p.Hash, Source: src}); err != nil {
		return nil, fmt.Errorf("store pipeline %s: %w", p.Key, err)
	}
	cp := &compiled{p: p, g: g}
	c.mu.Lock()
	c.byHash[p.Hash] = cp
	c.mu.Unlock()
	c.latest.Put(p.Key, p.Hash)
	return cp, nil
}

// get returns the pipeline version key@hash (the latest when hash is empty).
func (c *pipelineCache) get(ctx context.Context, key, hash string) (*compiled, error) {
	if hash == "" {
		if h, ok := c.latest.Get(key); ok {
			hash = h
		}
	}
	if cp := c.cached(hash); cp != nil {
		return cp, nil
	}
	v, err := c.st.GetPipeline(ctx, key, hash)
	if err != nil {
		return nil, fmt.Errorf("load pipeline %s@%s: %w", key, hash, err)
	}
	if hash == "" {
		c.latest.Put(key, v.Hash)
	}
	if cp := c.cached(v.Hash); cp != nil {
		return cp, nil
	}
	// Stored versions were validated when put; handlers may be registered later, so the known
	// handler check is skipped here and a missing handler fails the step instead.
	p, err := dag.Load(v.Source, nil)
	if err != nil {
		return nil, fmt.Errorf("parse stored pipeline %s@%s: %w", key, v.Hash, err)
	}
	g, err := dag.Compile(p)
	if err != nil {
		return nil, err
	}
	cp := &compiled{p: p, g: g}
	c.mu.Lock()
	c.byHash[p.Hash] = cp
	c.mu.Unlock()
	return cp, nil
}

func (c *pipelineCache) cached(hash string) *compiled {
	if hash == "" {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byHash[hash]
}

// Width returns the widest level of pipeline key@hash (controlplane.PipelineWidths).
func (c *pipelineCache) Width(ctx context.Context, key, hash string) (int, error) {
	cp, err := c.get(ctx, key, hash)
	if err != nil {
		return 0, err
	}
	return cp.g.Width(), nil
}
