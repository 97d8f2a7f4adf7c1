package actors

import (
	"context"
	"sync/atomic"
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
// mailbox that becomes busy is handed to a parked goroutine, and a new one is started in the
// pool group (the node's worker group) only when none is parked. protoactor's default
// dispatcher starts a goroutine per mailbox run, which for agents (mostly idle, woken by each
// message) means a goroutine start and its stack growth per message. Parked goroutines exit
// after one to two agentPoolIdle periods without work (counted on a shared channel that rotate
// closes each period, not on a timer per goroutine reset at every run) or when the pool group
// stops. It is goroutine-safe.
type agentDispatcher struct {
	pool *workgroup.Group
	work chan func() // unbuffered: a send succeeds only when a goroutine is parked
	// reap is closed and replaced by rotate every agentPoolIdle.
	reap atomic.Pointer[chan struct{}]
}

var _ actor.Dispatcher = (*agentDispatcher)(nil)

func newAgentDispatcher(pool *workgroup.Group) *agentDispatcher {
	d := &agentDispatcher{pool: pool, work: make(chan func())}
	ch := make(chan struct{})
	d.reap.Store(&ch)
	return d
}

// rotate ends one idle period: goroutines parked through two of them exit.
func (d *agentDispatcher) rotate() {
	ch := make(chan struct{})
	close(*d.reap.Swap(&ch))
}

// Schedule runs fn (a mailbox run) on a parked goroutine, or a new one of the pool.
func (d *agentDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
		return
	default:
	}
	if !d.pool.Go(func(ctx context.Context) { d.loop(ctx, fn) }) {
		// The pool stopped after every agent actor did: only a late run of an actor whose
		// stop timed out gets here, and protoactor's own dispatcher would start a goroutine too.
		go fn()
	}
}

// Throughput is the number of messages per mailbox run.
func (d *agentDispatcher) Throughput() int { return agentThroughput }

func (d *agentDispatcher) loop(ctx context.Context, fn func()) {
	for {
		fn()
		idle := 0
		for wait := true; wait; {
			select {
			case fn = <-d.work:
				wait = false
			case <-*d.reap.Load():
				if idle++; idle == 2 {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}
