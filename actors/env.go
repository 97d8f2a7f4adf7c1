package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// env is what every actor of a node shares: the store, the committer, handlers, pipelines,
// the local instance directory and timing settings. Its fields are set once at node start;
// the pieces it points to are goroutine-safe.
type env struct {
	nodeID      string
	incarnation string // the actor system id: unique per process start
	system      *actor.ActorSystem
	st          store.Store
	log         *zap.Logger
	hub         *Hub
	commits     *committer
	handlers    *step.Registry
	pipelines   *pipelineCache
	dir         *directory
	metrics     *Metrics
	pub         *publisher
	usageW      *usageWriter
	cfg         Config
	now         func() time.Time
	// group owns the node's background goroutines and timers; Node.Stop cancels and waits
	// for them before it closes the committer.
	group *workgroup.Group
	// dead is set once the cluster declared this incarnation dead: its runs belong to others.
	dead atomic.Bool
}

// ledger appends entries (batched with other runs' writes by the committer, in order per run)
// and wakes local waiters. It blocks until the entries are durable or ctx ends. Errors are
// logged, not returned: history is best-effort outside the fenced step commits, which carry
// their own entries atomically; the committer retries transport failures.
func (e *env) ledger(ctx context.Context, entries ...*messages.LedgerEntry) {
	for len(entries) > 0 {
		run := entries[0].SharedRunId
		n := 1
		for n < len(entries) && entries[n].SharedRunId == run {
			n++
		}
		group := entries[:n]
		entries = entries[n:]
		done := make(chan error, 1)
		if !e.commits.submit(commitReq{ledger: group, run: run, done: func(err error) { done <- err }}) {
			e.appendDirect(ctx, group)
			continue
		}
		select {
		case err := <-done:
			if err != nil {
				e.log.Warn("ledger append failed", zap.String("kind", group[0].Kind), zap.String("shared_run_id", run), zap.Error(err))
			}
		case <-ctx.Done():
			e.log.Warn("ledger append abandoned", zap.String("kind", group[0].Kind), zap.String("shared_run_id", run), zap.Error(ctx.Err()))
		}
	}
}

// finishRun updates run id with fn and, when fn reports that it changed the run, appends entry
// to the run's ledger in the same store write (a terminal status never exists without its
// terminal entry). It returns the stored run and whether fn changed it.
func (e *env) finishRun(ctx context.Context, id string, entry *messages.LedgerEntry, fn func(r *messages.SharedRun) bool) (*messages.SharedRun, bool, error) {
	changed := false
	run, appended, err := e.st.UpdateRunAndAppend(ctx, id, func(r *messages.SharedRun) (*messages.LedgerEntry, error) {
		changed = fn(r)
		if !changed {
			return nil, nil
		}
		return entry, nil
	})
	if err != nil {
		return nil, false, err
	}
	if appended != nil {
		e.hub.Notify(id, isTerminalKind(appended.Kind))
	}
	return run, changed, nil
}

// appendDirect writes entries without the committer (it is closed: the node is stopping).
func (e *env) appendDirect(ctx context.Context, entries []*messages.LedgerEntry) {
	if _, err := e.st.Append(ctx, entries...); err != nil {
		e.log.Warn("ledger append failed", zap.String("kind", entries[0].Kind), zap.String("shared_run_id", entries[0].SharedRunId), zap.Error(err))
		return
	}
	terminal := false
	for _, en := range entries {
		terminal = terminal || isTerminalKind(en.Kind)
	}
	e.hub.Notify(entries[0].SharedRunId, terminal)
}

func isTerminalKind(k string) bool {
	return k == messages.KindRunSucceeded || k == messages.KindRunFailed || k == messages.KindRunCancelled
}

// usage records a metering event without blocking the caller for I/O.
func (e *env) usage(ev *messages.UsageEvent) { e.usageW.add(ev) }

// directory maps local runtime instance ids to their PIDs (the local provider's Directory).
type directory struct {
	mu sync.RWMutex // guards m
	m  map[string]*actor.PID
}

func newDirectory() *directory { return &directory{m: make(map[string]*actor.PID)} }

// Lookup returns the PID of a local instance.
func (d *directory) Lookup(id string) (*actor.PID, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, ok := d.m[id]
	return p, ok
}

func (d *directory) put(id string, pid *actor.PID) {
	d.mu.Lock()
	d.m[id] = pid
	d.mu.Unlock()
}

func (d *directory) remove(id string, pid *actor.PID) {
	d.mu.Lock()
	if cur, ok := d.m[id]; ok && cur.Equal(pid) {
		delete(d.m, id)
	}
	d.mu.Unlock()
}

func (d *directory) ids() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.m))
	for id := range d.m {
		out = append(out, id)
	}
	return out
}

// pipelineCache holds parsed pipelines by content hash, loading misses from the store.
type pipelineCache struct {
	st       store.Store
	handlers *step.Registry
	mu       sync.RWMutex // guards byHash
	byHash   map[string]*compiled
	// latest caches each key's latest hash for a second (puts on this node update it).
	latest *ttlCache[string]
}

type compiled struct {
	p *dag.Pipeline
	g *dag.Graph
}

func newPipelineCache(st store.Store, h *step.Registry) *pipelineCache {
	return &pipelineCache{st: st, handlers: h, byHash: make(map[string]*compiled), latest: newTTLCache[string](time.Second)}
}

// put parses, validates and stores a pipeline definition and returns it compiled.
func (c *pipelineCache) put(ctx context.Context, src []byte) (*compiled, error) {
	p, err := dag.Load(src, c.handlers.Has)
	if err != nil {
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
	c.latest.put(p.Key, p.Hash)
	return cp, nil
}

// get returns the pipeline version key@hash (the latest when hash is empty).
func (c *pipelineCache) get(ctx context.Context, key, hash string) (*compiled, error) {
	if hash == "" {
		if h, ok := c.latest.get(key); ok {
			hash = h
		}
	}
	if hash != "" {
		c.mu.RLock()
		cp := c.byHash[hash]
		c.mu.RUnlock()
		if cp != nil {
			return cp, nil
		}
	}
	v, err := c.st.GetPipeline(ctx, key, hash)
	if err != nil {
		return nil, fmt.Errorf("load pipeline %s@%s: %w", key, hash, err)
	}
	if hash == "" {
		c.latest.put(key, v.Hash)
	}
	c.mu.RLock()
	cp := c.byHash[v.Hash]
	c.mu.RUnlock()
	if cp != nil {
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
	cp = &compiled{p: p, g: g}
	c.mu.Lock()
	c.byHash[p.Hash] = cp
	c.mu.Unlock()
	return cp, nil
}
