package actors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/workgroup"
)

// agentPoolIdle is how long a parked mailbox goroutine waits for work before it exits.
const agentPoolIdle = time.Second

// agentThroughput is how many messages a mailbox handles per run before yielding
// (protoactor's default).
const agentThroughput = 300

// agentDispatcher runs the mailboxes of the agent runtime's actors on reused goroutines: a
// mailbox that becomes busy is handed to the goroutine parked last (its stack and caches are
// the warmest), and a new one is started in the pool group (the node's worker group) only when
// none is parked. protoactor's default dispatcher starts a goroutine per mailbox run, which for
// agents (mostly idle, woken by each message) means a goroutine start and its stack growth per
// message. Each parked goroutine waits on its own channel only (a wait on channels shared by
// every parked goroutine costs a lock of each per run, contended on every core). Goroutines
// parked through two agentPoolIdle periods (rotate) exit, and all do when the pool group stops.
// It is goroutine-safe.
type agentDispatcher struct {
	pool *workgroup.Group

	mu sync.Mutex // guards idle, gen, closed
	// idle are the parked goroutines, the most recently parked last.
	idle   []*agentPooled
	gen    uint64 // idle periods ended (rotate)
	closed bool   // the pool group stopped: nothing parks any more
}

// agentPooled is one parked goroutine: Schedule hands it a mailbox run, a nil run tells it to
// exit.
type agentPooled struct {
	run chan func() // buffered 1: written once per park, by whoever took it off idle
	gen uint64      // the idle period it parked in
}

var _ actor.Dispatcher = (*agentDispatcher)(nil)

func newAgentDispatcher(pool *workgroup.Group) *agentDispatcher {
	d := &agentDispatcher{pool: pool}
	if !pool.Go(func(ctx context.Context) {
		<-ctx.Done()
		d.shutdown()
	}) {
		d.closed = true
	}
	return d
}

// rotate ends one idle period: goroutines parked through two of them exit.
func (d *agentDispatcher) rotate() {
	d.mu.Lock()
	d.gen++
	n := 0
	for n < len(d.idle) && d.idle[n].gen+2 <= d.gen { // the oldest come first
		n++
	}
	reaped := d.idle[:n:n]
	d.idle = d.idle[n:]
	d.mu.Unlock()
	for _, p := range reaped {
		p.run <- nil
	}
}

// shutdown wakes every parked goroutine to exit; none parks afterwards.
func (d *agentDispatcher) shutdown() {
	d.mu.Lock()
	d.closed = true
	idle := d.idle
	d.idle = nil
	d.mu.Unlock()
	for _, p := range idle {
		p.run <- nil
	}
}

// Schedule runs fn (a mailbox run) on a parked goroutine, or a new one of the pool.
func (d *agentDispatcher) Schedule(fn func()) {
	if p := d.take(); p != nil {
		p.run <- fn
		return
	}
	if !d.pool.Go(func(context.Context) { d.loop(fn) }) {
		// The pool stopped after every agent actor did: only a late run of an actor whose
		// stop timed out gets here, and protoactor's own dispatcher would start a goroutine too.
		go fn()
	}
}

// take returns the goroutine parked last, off the idle list, or nil when none is parked.
func (d *agentDispatcher) take() *agentPooled {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.idle)
	if n == 0 {
		return nil
	}
	p := d.idle[n-1]
	d.idle[n-1] = nil
	d.idle = d.idle[:n-1]
	return p
}

// Throughput is the number of messages per mailbox run.
func (d *agentDispatcher) Throughput() int { return agentThroughput }

// loop runs fn, then the runs handed to it while parked, until told to exit.
func (d *agentDispatcher) loop(fn func()) {
	p := &agentPooled{run: make(chan func(), 1)}
	for fn != nil {
		fn()
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		p.gen = d.gen
		d.idle = append(d.idle, p)
		d.mu.Unlock()
		fn = <-p.run
	}
}
