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
// blocking (latest wins); one goroutine of the node's group writes, at most every flushEach
// per instance change and at every heartbeat, and flushes once more when the group stops.
type publisher struct {
	st        publisherStore
	log       *zap.Logger
	metrics   *metrics.Metrics
	ttl       time.Duration
	resTTL    time.Duration
	flushEach time.Duration
	// self is this incarnation (CapacityDescriptor.NodeId of the instances it publishes).
	self string

	mu      sync.Mutex // guards pending, removed, onDead
	pending map[string]pubState
	removed map[string]bool
	// onDead, when set, is called (from the publisher's goroutine) when the registry refuses a
	// descriptor because this incarnation was declared dead.
	onDead func()
	wake   chan struct{}
}

type pubState struct {
	d    *messages.CapacityDescriptor
	runs []string
}

// newPublisher returns a publisher; start runs its loop. metrics (nil-safe) receives each
// published descriptor as the per-instance capacity gauges, and drops an instance's gauges on
// removal.
func newPublisher(st publisherStore, log *zap.Logger, m *metrics.Metrics, ttl, resTTL time.Duration, self string) *publisher {
	return &publisher{st: st, log: log, metrics: m, ttl: ttl, resTTL: resTTL, self: self, flushEach: 10 * time.Millisecond,
		pending: map[string]pubState{}, removed: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// start runs the publisher's loop in g.
func (p *publisher) start(g *workgroup.Group) { g.Go(p.loop) }

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
	if runs == nil {
		runs = p.pending[d.RuntimeInstanceId].runs
	}
	p.pending[d.RuntimeInstanceId] = pubState{d: d, runs: runs}
	delete(p.removed, d.RuntimeInstanceId)
	p.mu.Unlock()
	p.poke()
}

// remove unregisters an instance that stopped. It does not block.
func (p *publisher) remove(id string) {
	p.mu.Lock()
	delete(p.pending, id)
	p.removed[id] = true
	p.mu.Unlock()
	p.poke()
}

func (p *publisher) poke() {
	select {
	case p.wake <- struct{}{}:
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

func (p *publisher) flush(ctx context.Context) {
	p.mu.Lock()
	pending, removed := p.pending, p.removed
	p.pending, p.removed = map[string]pubState{}, map[string]bool{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	for id, s := range pending {
		p.metrics.Capacity(s.d)
		if err := p.st.PutInstance(ctx, s.d, p.ttl); err != nil {
			if errors.Is(err, store.ErrMemberDead) {
				// The cluster declared this incarnation dead: the registry refuses it for good.
				p.mu.Lock()
				onDead := p.onDead
				p.mu.Unlock()
				if onDead != nil {
					onDead()
				}
				continue
			}
			p.log.Warn("publish capacity", zap.String("runtime_instance_id", id), zap.Error(err))
			p.retry(id, s)
			continue
		}
		if len(s.runs) > 0 {
			if err := p.st.RefreshReservations(ctx, id, s.runs, p.resTTL); err != nil {
				p.log.Warn("refresh reservations", zap.String("runtime_instance_id", id), zap.Error(err))
			}
		}
	}
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

// retry keeps a failed write for the next flush unless newer state arrived meanwhile.
func (p *publisher) retry(id string, s pubState) {
	p.mu.Lock()
	if _, newer := p.pending[id]; !newer && !p.removed[id] {
		p.pending[id] = s
	}
	p.mu.Unlock()
}
