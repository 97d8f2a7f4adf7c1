package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// agentBatch collects the outcomes of one SendAgentBatch call. Every delivery of the batch
// carries the batch and its index; whoever has an outcome for it (the agent, the worker
// refusing it, the router resolving its session, the caller giving up at its deadline) offers
// it with set, and the first offer wins: a late answer after a TIMEOUT is dropped, as for a
// single send. It is goroutine-safe.
type agentBatch struct {
	outcomes  []atomic.Pointer[messages.DeliveryOutcome]
	remaining atomic.Int64
	// done gets one signal when the last outcome was set (buffered 1).
	done chan struct{}
	// workers holds the worker of each delivery's route ("" when unroutable), for the outcomes
	// given up without one; set before the deliveries go out, read-only afterwards.
	workers []string
}

func newAgentBatch(n int) *agentBatch {
	b := &agentBatch{outcomes: make([]atomic.Pointer[messages.DeliveryOutcome], n), done: make(chan struct{}, 1),
		workers: make([]string, n)}
	b.remaining.Store(int64(n))
	return b
}

// set offers o as the outcome of delivery i; it reports whether o was taken.
func (b *agentBatch) set(i int, o *messages.DeliveryOutcome) bool {
	if !b.outcomes[i].CompareAndSwap(nil, o) {
		return false
	}
	if b.remaining.Add(-1) == 0 {
		b.done <- struct{}{}
	}
	return true
}

// agentBatchGroup is the deliveries of a batch to one agent of this node, in batch order.
type agentBatchGroup struct {
	key agents.Key
	n   int
	ds  []agentDeliver // set by build
}

// agentLocalItem is one delivery of a batch to an agent of this node, before build.
type agentLocalItem struct {
	env    *messages.MessageEnvelope
	tenant string
	spec   *agentTypeSpec
	idx    int // in the batch
	group  int
}

// agentLocalPlan is the deliveries of a batch to this node's agents, grouped by agent: add them
// in batch order, then build lays them out, each agent's contiguous and in order, in one array
// (records are built in place: an agentDeliver holds its handler's context and is not copied).
type agentLocalPlan struct {
	items  []agentLocalItem
	groups []agentBatchGroup
	index  map[agents.Key]int // key -> index in groups
}

// add records delivery it to the agent of key.
func (p *agentLocalPlan) add(key agents.Key, it agentLocalItem, size int) {
	if p.index == nil {
		p.index, p.items = make(map[agents.Key]int, size), make([]agentLocalItem, 0, size)
	}
	g, ok := p.index[key]
	if !ok {
		g = len(p.groups)
		p.index[key] = g
		p.groups = append(p.groups, agentBatchGroup{key: key})
	}
	p.groups[g].n++
	it.group = g
	p.items = append(p.items, it)
}

// build lays the deliveries out for batch b and sets each group's.
func (p *agentLocalPlan) build(b *agentBatch) {
	ds := make([]agentDeliver, len(p.items))
	next := make([]int, len(p.groups)) // the next free position of each group
	at := 0
	for g := range p.groups {
		next[g] = at
		p.groups[g].ds = ds[at : at+p.groups[g].n]
		at += p.groups[g].n
	}
	for _, it := range p.items {
		ds[next[it.group]] = agentDeliver{env: it.env, tenant: it.tenant, spec: it.spec, batch: b, idx: it.idx}
		next[it.group]++
	}
}

// agentDeliveries carries deliveries to one agent (past the worker), or to the worker, in order.
type agentDeliveries struct{ ds []agentDeliver }

// agentRouteBatch asks this node's router to deliver the items of a batch under sessions.
type agentRouteBatch struct {
	batch *agentBatch
	items []agentRouteItem
}

// agentRouteItem is one delivery of a batch through the router: envelope, tenant and index.
type agentRouteItem struct {
	env    *messages.MessageEnvelope
	tenant string
	idx    int
}

// sendBatch routes every envelope of envs by one snapshot of the routing table and waits for
// all their outcomes: the deliveries to this node's agents go in one message per active agent
// (past the worker) and one to the worker for the others; the rest go to the router in one
// message, which sends one request per destination worker. The envelopes of one agent take one
// path, in order, so an agent handles them in batch order.
func (rt *agentRuntime) sendBatch(ctx context.Context, envs []*messages.MessageEnvelope) ([]*messages.DeliveryOutcome, error) {
	if rt == nil {
		return nil, ErrAgentsStopped
	}
	rt.inflight.Add(1)
	defer rt.inflight.Add(-1)
	b := newAgentBatch(len(envs))
	if !rt.accepting.Load() {
		for i := range envs {
			b.set(i, agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s is stopping", rt.nodeID), ""))
		}
		return b.collect(), nil
	}
	deadlines := make([]time.Time, len(envs))
	table := rt.table.Load()
	var local agentLocalPlan
	var remote *agentRouteBatch
	def := time.Now().Add(rt.cfg.RPCTimeout) // for the envelopes without a deadline
	for i, env := range envs {
		deadlines[i] = deadlineOf(ctx, env, def)
		tenant := env.GetSnapshot().GetTenantId()
		route := table.Route(tenant, env.Recipient)
		if route.Worker != nil {
			b.workers[i] = route.Worker.ID
		}
		switch {
		case route.Worker == nil:
			b.set(i, agents.Undeliverable(route.Reason, ""))
		case !route.Worker.Self:
			if remote == nil {
				remote = &agentRouteBatch{batch: b}
			}
			remote.items = append(remote.items, agentRouteItem{env: env, tenant: tenant, idx: i})
		default:
			spec, refused := rt.check(env, tenant)
			if refused != nil {
				b.set(i, refused)
				continue
			}
			local.add(agents.KeyOf(tenant, env.Recipient), agentLocalItem{env: env, tenant: tenant, spec: spec, idx: i}, len(envs))
		}
	}
	if remote != nil {
		rt.system.Root.Send(rt.router, remote)
	}
	rt.trackBatch(b, true)
	defer rt.trackBatch(b, false)
	rt.deliverLocal(&local, b)
	return rt.awaitBatch(ctx, envs, b, deadlines)
}

// deliverLocal sends each group of p to its active agent, or to the worker.
func (rt *agentRuntime) deliverLocal(p *agentLocalPlan, b *agentBatch) {
	if len(p.items) == 0 {
		return
	}
	p.build(b)
	for i := range p.groups {
		g := &p.groups[i]
		m := &agentDeliveries{ds: g.ds}
		if slot := rt.slots.get(g.key); slot != nil && slot.acquireN(uint64(g.n)) {
			rt.system.Root.Send(slot.pid, m)
		} else {
			rt.system.Root.Send(rt.worker, m)
		}
	}
}

// routeBatch routes the deliveries of a batch: one session each, in the batches of their
// workers (in order: the deliveries of one agent keep theirs); those that now route to this
// node go to the worker in one message.
func (r *agentRouter) routeBatch(c actor.Context, m *agentRouteBatch) {
	var local []agentDeliver
	now := time.Now()
	for _, it := range m.items {
		if r.stopping {
			m.batch.set(it.idx, agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s is stopping", r.rt.nodeID), ""))
			continue
		}
		route := r.table.Route(it.tenant, it.env.Recipient)
		switch {
		case route.Worker == nil:
			m.batch.set(it.idx, agents.Undeliverable(route.Reason, ""))
		case route.Worker.Self:
			local = append(local, agentDeliver{env: it.env, tenant: it.tenant, batch: m.batch, idx: it.idx})
		default:
			r.enqueue(c, route.Worker, it.env, routerCall{batch: m.batch, idx: it.idx}, now)
		}
	}
	if len(local) > 0 {
		c.Send(r.worker, &agentDeliveries{ds: local})
	}
}

// awaitBatch waits until every delivery of b has its outcome, giving each up at its deadline
// (TIMEOUT), when ctx ends (TIMEOUT for an expired ctx, else ctx's error) or when the runtime
// stops (UNDELIVERABLE); it returns the outcomes in batch order.
func (rt *agentRuntime) awaitBatch(ctx context.Context, envs []*messages.MessageEnvelope, b *agentBatch,
	deadlines []time.Time) ([]*messages.DeliveryOutcome, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		next, ok := b.nextDeadline(deadlines)
		if !ok {
			return b.collect(), nil
		}
		var fallback <-chan time.Time
		wake := rt.deadlines.wait(next)
		if wake == nil { // the deadline's tick is being closed: a timer, once
			if timer == nil {
				timer = time.NewTimer(time.Until(next))
			} else {
				timer.Reset(time.Until(next))
			}
			fallback = timer.C
		}
		select {
		case <-b.done:
			return b.collect(), nil
		case <-wake:
			if rt.deadlines.stopped.Load() {
				rt.failBatch(b)
				return b.collect(), nil
			}
		case <-fallback:
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, ctx.Err()
			}
			b.fill(func(w string) *messages.DeliveryOutcome {
				return agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "the caller's context ended"), w)
			})
			return b.collect(), nil
		}
		now := time.Now()
		for i := range deadlines {
			if b.outcomes[i].Load() == nil && !now.Before(deadlines[i]) {
				b.set(i, agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "no reply from agent %s/%s before the deadline",
					envs[i].Recipient.Type, envs[i].Recipient.Key), b.workers[i]))
			}
		}
	}
}

// nextDeadline returns the earliest deadline of the deliveries still without an outcome; false
// when every one has its outcome.
func (b *agentBatch) nextDeadline(deadlines []time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	for i := range b.outcomes {
		if b.outcomes[i].Load() == nil && (!found || deadlines[i].Before(next)) {
			next, found = deadlines[i], true
		}
	}
	return next, found
}

// fill sets mk's outcome, with the worker of its route, for every delivery still without one.
func (b *agentBatch) fill(mk func(worker string) *messages.DeliveryOutcome) {
	for i := range b.outcomes {
		if b.outcomes[i].Load() == nil {
			b.set(i, mk(b.workers[i]))
		}
	}
}

// trackBatch adds b to the runtime's pending batches (add) or removes it.
func (rt *agentRuntime) trackBatch(b *agentBatch, add bool) {
	rt.batchMu.Lock()
	defer rt.batchMu.Unlock()
	if !add {
		delete(rt.batches, b)
		return
	}
	if rt.batches == nil {
		rt.batches = map[*agentBatch]struct{}{}
	}
	rt.batches[b] = struct{}{}
}

// failBatch gives every delivery of b still pending UNDELIVERABLE (the runtime stopped).
func (rt *agentRuntime) failBatch(b *agentBatch) {
	b.fill(func(w string) *messages.DeliveryOutcome {
		return agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s stopped", rt.nodeID), w)
	})
}

// failBatches fails the pending batches (stop, before the handlers are cancelled: a handler's
// cancellation is the stop's consequence, not the agent's error).
func (rt *agentRuntime) failBatches() {
	rt.batchMu.Lock()
	defer rt.batchMu.Unlock()
	for b := range rt.batches {
		rt.failBatch(b)
	}
}

// collect returns the outcomes, each set (the caller owns them).
func (b *agentBatch) collect() []*messages.DeliveryOutcome {
	out := make([]*messages.DeliveryOutcome, len(b.outcomes))
	for i := range b.outcomes {
		out[i] = b.outcomes[i].Load()
	}
	return out
}
