package actors

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// publisher writes the latest capacity descriptor of each local runtime instance to the
// registry and refreshes the reservations its runs hold. Instances hand it state without
// blocking (latest wins); one goroutine writes, at most every flushEvery per instance change
// and at every heartbeat.
type publisher struct {
	st        store.Store
	log       *zap.Logger
	metrics   *Metrics
	ttl       time.Duration
	resTTL    time.Duration
	flushEach time.Duration
	// onDead, when set, is called (from the publisher's goroutine) when the registry refuses a
	// descriptor because this incarnation was declared dead. Guarded by mu.
	onDead func()
	// self is this incarnation (CapacityDescriptor.NodeId of the instances it publishes).
	self string

	mu      sync.Mutex // guards pending, removed, onDead
	pending map[string]pubState
	removed map[string]bool
	wake    chan struct{}

	stop chan struct{}
	done chan struct{}
}

type pubState struct {
	d    *messages.CapacityDescriptor
	runs []string
}

// newPublisher starts the publisher's goroutine. metrics (nil-safe) receives each published
// descriptor as the per-instance capacity gauges, and drops an instance's gauges on removal.
func newPublisher(st store.Store, log *zap.Logger, metrics *Metrics, ttl, resTTL time.Duration, self string) *publisher {
	p := &publisher{st: st, log: log, metrics: metrics, ttl: ttl, resTTL: resTTL, self: self, flushEach: 10 * time.Millisecond,
		pending: map[string]pubState{}, removed: map[string]bool{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *publisher) put(d *messages.CapacityDescriptor, runs []string) {
	p.mu.Lock()
	p.pending[d.RuntimeInstanceId] = pubState{d: d, runs: runs}
	delete(p.removed, d.RuntimeInstanceId)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *publisher) remove(id string) {
	p.mu.Lock()
	delete(p.pending, id)
	p.removed[id] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *publisher) loop() {
	defer close(p.done)
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			p.flush()
			return
		}
		p.flush()
		t := time.NewTimer(p.flushEach)
		select {
		case <-t.C:
		case <-p.stop:
			t.Stop()
			p.flush()
			return
		}
	}
}

func (p *publisher) flush() {
	p.mu.Lock()
	pending, removed := p.pending, p.removed
	p.pending, p.removed = map[string]pubState{}, map[string]bool{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for id, s := range pending {
		p.metrics.capacity(s.d)
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
		p.metrics.dropInstance(id)
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

func (p *publisher) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// usageWriter appends usage events in batches off the hot path.
type usageWriter struct {
	st   store.Store
	log  *zap.Logger
	in   chan *messages.UsageEvent
	stop chan struct{}
	done chan struct{}
}

func newUsageWriter(st store.Store, log *zap.Logger) *usageWriter {
	u := &usageWriter{st: st, log: log, in: make(chan *messages.UsageEvent, 8192), stop: make(chan struct{}), done: make(chan struct{})}
	go u.loop()
	return u
}

func (u *usageWriter) add(ev *messages.UsageEvent) {
	select {
	case u.in <- ev:
	case <-u.stop:
	}
}

func (u *usageWriter) loop() {
	defer close(u.done)
	for {
		var batch []*messages.UsageEvent
		select {
		case ev := <-u.in:
			batch = append(batch, ev)
		case <-u.stop:
			u.drain()
			return
		}
	fill:
		for len(batch) < 512 {
			select {
			case ev := <-u.in:
				batch = append(batch, ev)
			default:
				break fill
			}
		}
		u.write(batch)
	}
}

func (u *usageWriter) drain() {
	var batch []*messages.UsageEvent
	for {
		select {
		case ev := <-u.in:
			batch = append(batch, ev)
		default:
			u.write(batch)
			return
		}
	}
}

func (u *usageWriter) write(batch []*messages.UsageEvent) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := u.st.AppendUsage(ctx, batch...); err != nil {
		u.log.Warn("append usage", zap.Int("events", len(batch)), zap.Error(err))
	}
}

func (u *usageWriter) close() {
	select {
	case <-u.stop:
	default:
		close(u.stop)
	}
	<-u.done
}
