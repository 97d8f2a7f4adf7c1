package actors

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/metrics"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// writeTimeout bounds one store write of the publisher, also the final
// flush after the node's stop began.
const writeTimeout = 5 * time.Second

// publisherStore is what the publisher writes.
type publisherStore interface {
	store.Registry
	RefreshReservations(ctx context.Context, instanceID string, runIDs []string, ttl time.Duration) error
}

// publisher writes the latest capacity descriptor of each local runtime instance to the
// registry and refreshes the reservations its runs hold. Instances hand it state without
// blocking (latest wins). Two goroutines of the node's group write: one the descriptors, at
// most every flushEach per instance change and at every heartbeat, one the hold extensions of
// the heartbeats; each flushes once more when the group stops. Holds have their own writer
// because an instance's holds are one store write per few thousand runs: under a burst a round
// of them takes seconds, and a descriptor waiting behind it reads as a stale heartbeat (the
// reconciler then asks for a replacement of a healthy instance).
type publisher struct {
	st        publisherStore
	log       *zap.Logger
	metrics   *metrics.Metrics
	ttl       time.Duration
	resTTL    time.Duration
	flushEach time.Duration
	// self is this incarnation (CapacityDescriptor.NodeId of the instances it publishes).
	self string

	mu      sync.Mutex // guards pending, removed, holds, onDead
	pending map[string]*messages.CapacityDescriptor
	removed map[string]bool
	// holds are the runs whose holds to extend, per instance (the latest heartbeat's).
	holds map[string][]string
	// onDead, when set, is called (from the publisher's goroutine) when the registry refuses a
	// descriptor because this incarnation was declared dead.
	onDead   func()
	wake     chan struct{}
	holdWake chan struct{}
}

// newPublisher returns a publisher; start runs its loops. metrics (nil-safe) receives each
// published descriptor as the per-instance capacity gauges, and drops an instance's gauges on
// removal.
func newPublisher(st publisherStore, log *zap.Logger, m *metrics.Metrics, ttl, resTTL time.Duration, self string) *publisher {
	return &publisher{st: st, log: log, metrics: m, ttl: ttl, resTTL: resTTL, self: self, flushEach: 10 * time.Millisecond,
		pending: map[string]*messages.CapacityDescriptor{}, removed: map[string]bool{}, holds: map[string][]string{},
		wake: make(chan struct{}, 1), holdWake: make(chan struct{}, 1)}
}

// start runs the publisher's loops in g.
func (p *publisher) start(g *workgroup.Group) {
	g.Go(p.loop)
	g.Go(p.holdLoop)
}

// setOnDead sets the callback of a refused descriptor (see onDead).
func (p *publisher) setOnDead(fn func()) {
	p.mu.Lock()
	p.onDead = fn
	p.mu.Unlock()
}

// put hands the latest state of an instance to the publisher, with the runs whose holds to
// extend (nil: none; a pending extension not yet written is kept). It does not block.
func (p *publisher) put(d *messages.CapacityDescriptor, runs []string) {
	p.mu.Lock()
	p.pending[d.RuntimeInstanceId] = d
	delete(p.removed, d.RuntimeInstanceId)
	if runs != nil {
		p.holds[d.RuntimeInstanceId] = runs
	}
	p.mu.Unlock()
	poke(p.wake)
	if runs != nil {
		poke(p.holdWake)
	}
}

// remove unregisters an instance that stopped. It does not block.
func (p *publisher) remove(id string) {
	p.mu.Lock()
	delete(p.pending, id)
	delete(p.holds, id)
	p.removed[id] = true
	p.mu.Unlock()
	poke(p.wake)
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (p *publisher) loop(ctx context.Context) {
	defer p.flush(ctx) // the last word of the stopped instances
	for {
		select {
		case <-p.wake:
		case <-ctx.Done():
			return
		}
		p.flush(ctx)
		t := time.NewTimer(p.flushEach)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

func (p *publisher) holdLoop(ctx context.Context) {
	defer p.flushHolds(ctx)
	for {
		select {
		case <-p.holdWake:
		case <-ctx.Done():
			return
		}
		p.flushHolds(ctx)
	}
}

func (p *publisher) flush(ctx context.Context) {
	p.mu.Lock()
	pending, removed := p.pending, p.removed
	p.pending, p.removed = map[string]*messages.CapacityDescriptor{}, map[string]bool{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	// The descriptors in parallel: under load each write waits its turn for a store connection,
	// and one after the other a round of twenty instances took seconds (stale heartbeats).
	ds := make([]*messages.CapacityDescriptor, 0, len(pending))
	for _, d := range pending {
		p.metrics.Capacity(d)
		ds = append(ds, d)
	}
	workgroup.Each(ds, publishParallelism, func(d *messages.CapacityDescriptor) { p.write(ctx, d.RuntimeInstanceId, d) })
	for id := range removed {
		p.metrics.DropInstance(id)
		// Instance ids are reused: once this incarnation's entry is gone (its member was
		// declared dead), the id may already name another member's instance. Delete only ours.
		if cur, err := p.st.GetInstance(ctx, id); err == nil && p.self != "" && cur.GetNodeId() != p.self {
			continue
		}
		if err := p.st.DeleteInstance(ctx, id); err != nil {
			p.log.Warn("unregister instance", zap.String("runtime_instance_id", id), zap.Error(err))
		}
	}
}

// publishParallelism bounds the descriptor writes of one flush in flight at once.
const publishParallelism = 8

// write puts one descriptor, keeping it for the next flush when the write failed.
func (p *publisher) write(ctx context.Context, id string, d *messages.CapacityDescriptor) {
	err := p.st.PutInstance(ctx, d, p.ttl)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrMemberDead):
		// The cluster declared this incarnation dead: the registry refuses it for good.
		p.mu.Lock()
		onDead := p.onDead
		p.mu.Unlock()
		if onDead != nil {
			onDead()
		}
	default:
		p.log.Warn("publish capacity", zap.String("runtime_instance_id", id), zap.Error(err))
		p.retry(id, d)
	}
}

// flushHolds extends the holds handed since the last flush. A failed extension is not kept:
// the next heartbeat's comes within a fraction of a hold's TTL.
func (p *publisher) flushHolds(ctx context.Context) {
	p.mu.Lock()
	holds := p.holds
	p.holds = map[string][]string{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	for id, runs := range holds {
		if len(runs) == 0 {
			continue
		}
		if err := p.st.RefreshReservations(ctx, id, runs, p.resTTL); err != nil {
			p.log.Warn("refresh reservations", zap.String("runtime_instance_id", id), zap.Error(err))
		}
	}
}

// retry keeps a failed write for the next flush unless newer state arrived meanwhile.
func (p *publisher) retry(id string, d *messages.CapacityDescriptor) {
	p.mu.Lock()
	if _, newer := p.pending[id]; !newer && !p.removed[id] {
		p.pending[id] = d
	}
	p.mu.Unlock()
}
