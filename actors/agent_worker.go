package actors

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// agentWorker is a node's agent worker (seed 003's worker runtime): it serves the types of the
// runtime's catalog, activates each agent (tenant, type, key) as a child actor (agent_actor.go)
// on its first delivery, forwards every delivery to it in arrival order, and passivates agents
// that received nothing for about the idle timeout (their state is kept here and handed back on
// the next activation). Outcomes of remote sends go back to the sending router in one
// AgentSendResponse per router and mailbox run; they are not acknowledged, because the router's
// session table bounds every wait (deadline, RPC timeout, eviction). Publish batches are
// acknowledged once their deliveries are enqueued.
type agentWorker struct {
	rt       *agentRuntime
	children map[agents.Key]*agentChild
	states   map[agents.Key]any // state of passivated agents
	gen      uint64             // sweep generation
	replies  map[string]*workerReplies
	flushing bool
	// awaiting counts the deliveries of requests of several deliveries forwarded and not
	// answered yet; held is set while a delayed flush is armed (replyHold).
	awaiting int
	held     bool
	// drainReply answers an agentDrain once every agent in draining acknowledged its marker.
	drainReply *actor.PID
	draining   map[agents.Key]bool
	// results are the answered deliveries last taken from the runtime's results intake.
	results []*agentDeliver
	// room sizes the packed responses.
	room packRoom
}

// agentChild is the worker's record of one active agent.
type agentChild struct {
	pid         *actor.PID
	slot        *agentSlot // its entry for direct local deliveries
	forwarded   uint64     // deliveries the worker sent it
	gen         uint64     // sweep generation of its last delivery through the worker
	seen        uint64     // direct deliveries counted at the last sweep
	passivating bool
}

// workerReplies are the outcomes for one router waiting for the next flush: packed as they come
// for a router that takes packed results (messages.AppendResult), in Results otherwise.
type workerReplies struct {
	router *actor.PID
	resp   *messages.AgentSendResponse
	n      int  // outcomes queued
	bytes  int  // the responses' payload bytes (it goes out at Config.MaxBatchBytes)
	packed bool // the router takes packed results (AgentSendRequest.packed_results)
}

// Messages between the worker and its agents.
type (
	// agentDeliver is one delivery to an agent. Exactly one of done (local send), batch (local
	// batch send), router (remote send, with its session) or none (publish) says where the
	// outcome goes.
	agentDeliver struct {
		env       *messages.MessageEnvelope
		tenant    string
		spec      *agentTypeSpec
		done      chan<- *messages.DeliveryOutcome
		router    *actor.PID
		routerKey string
		session   uint64
		// batch, when set, takes the outcome at index idx (SendAgentBatch).
		batch *agentBatch
		idx   int
		// direct makes the agent answer the router itself (a request of one delivery: no
		// other outcome to gather, and one hop less); otherwise it answers the worker.
		direct bool
		// packed: the router takes packed results (AgentSendRequest.packed_results).
		packed bool
		// outcome is set by the agent, or the worker refusing the delivery, before it goes
		// back to the worker (the runtime's results intake).
		outcome *messages.DeliveryOutcome
		// ctx is the handler's context, part of the record (no allocation per call): a record
		// is built in place and never copied (go vet's copylocks checks it).
		ctx agentCtx
	}
	agentPassivate  struct{}
	agentPassivated struct {
		key       agents.Key
		processed uint64 // deliveries the agent handled
		state     any
	}
	agentDrainMarker struct{}
	agentDrainAck    struct{ key agents.Key }
	// agentOwnersChanged tells the worker the node's routing table changed (table).
	agentOwnersChanged struct{ table *agents.Table }
	// agentReset makes an agent drop its state: its key moved to another owner.
	agentReset           struct{}
	agentWorkerFlush     struct{}
	agentWorkerHeldFlush struct{}
)

// agentIdleSweeps is how many sweeps (each IdleTimeout/2 apart) an agent must go without a
// delivery to be passivated: it then was idle between IdleTimeout and 1.5 × IdleTimeout.
const agentIdleSweeps = 3

func newAgentWorker(rt *agentRuntime) *agentWorker {
	return &agentWorker{rt: rt, children: map[agents.Key]*agentChild{}, states: map[agents.Key]any{},
		replies: map[string]*workerReplies{}}
}

func (w *agentWorker) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *agentLocalSend:
		d := m.deliver
		if d == nil {
			d = &agentDeliver{env: m.env, tenant: m.tenant, done: m.done}
		}
		w.deliver(c, d)
	case *agentDeliveries:
		for i := range m.ds {
			w.deliver(c, &m.ds[i])
		}
	case *messages.AgentSendRequest:
		w.request(c, m)
	case *messages.AgentPublishBatch:
		c.Respond(w.enqueuePublish(c, m))
	case *actor.Started:
		w.takeResults(c) // those queued while the worker restarted
	case agentResultsQueued:
		w.takeResults(c)
	case agentWorkerFlush:
		w.takeResults(c)
		w.flushing = false
		if w.awaiting > 0 && !w.acking() {
			w.hold(c)
			return
		}
		w.flush(c)
	case agentWorkerHeldFlush:
		w.held = false
		w.flush(c)
	case *messages.AgentHealthProbe:
		cat := w.rt.catalog.Load()
		reply := &messages.AgentHealthReply{WorkerId: w.rt.selfID, Version: cat.version, ActiveAgents: int32(len(w.children))}
		if m.KnownVersion < cat.version {
			reply.Registration = cat.reg
		}
		c.Respond(reply)
	case agentSweepMsg:
		w.sweep(c)
	case *agentPassivated:
		w.passivated(c, m)
	case agentDrain:
		w.drainReply, w.draining = c.Sender(), map[agents.Key]bool{}
		for k, ch := range w.children {
			w.draining[k] = true
			c.Send(ch.pid, agentDrainMarker{})
		}
		w.drained(c)
	case *agentDrainAck:
		delete(w.draining, m.key)
		w.drained(c)
	case agentActiveReq:
		c.Respond(len(w.children))
	case *agentOwnersChanged:
		w.disown(c, m.table)
	case *actor.Restarting, *actor.Stopping:
		// The agents stop with the worker: callers must go through the next worker instance.
		w.rt.slots.clear()
	}
}

// request forwards the deliveries of a router's send request to their agents, refusing the
// invalid ones, and queues its acknowledgement.
func (w *agentWorker) request(c actor.Context, m *messages.AgentSendRequest) {
	router := c.Sender()
	if router == nil {
		w.rt.log.Warn("agent send request without sender dropped", zap.String("router", m.RouterId))
		return
	}
	var sessions []uint64
	var envs []*messages.MessageEnvelope
	if len(m.Packed) > 0 {
		var err error
		if sessions, envs, err = messages.UnpackDeliveryList(m.Packed); err != nil {
			// Their sessions end at their deadlines on the router.
			w.rt.log.Warn("undecodable send request dropped", zap.String("router", m.RouterId), zap.Error(err))
			return
		}
	} else {
		sessions, envs = make([]uint64, len(m.Deliveries)), make([]*messages.MessageEnvelope, len(m.Deliveries))
		for i, d := range m.Deliveries {
			sessions[i], envs[i] = d.Session, d.Envelope
		}
	}
	n := len(sessions)
	ds := make([]agentDeliver, n) // one allocation per request
	if n > 1 {
		w.awaiting += n // each is answered through reply, refused or handled
	}
	for i, env := range envs {
		ad := &ds[i]
		*ad = agentDeliver{env: env, tenant: env.GetSnapshot().GetTenantId(), router: router,
			routerKey: m.RouterId, session: sessions[i], direct: n == 1, packed: m.PackedResults}
		if err := agents.ValidateAgentID(env.GetRecipient()); err != nil {
			w.finish(c, ad, agents.Undeliverable(agents.Reason(agents.ReasonNoLiveOwner, "%v", err), w.rt.selfID))
			continue
		}
		w.deliver(c, ad)
	}
	if n >= ackedBatch {
		w.replyQueue(c, router, m.RouterId).resp.Requests++ // acknowledged in the next flush
	}
}

// deliver forwards d to its agent, activating it first if needed.
func (w *agentWorker) deliver(c actor.Context, d *agentDeliver) {
	if d.spec == nil {
		spec, refused := w.rt.check(d.env, d.tenant)
		if refused != nil {
			w.finish(c, d, refused)
			return
		}
		d.spec = spec
	}
	key := agents.KeyOf(d.tenant, d.env.Recipient)
	ch := w.children[key]
	if ch == nil {
		ch = w.activate(c, key, d.env.Recipient)
	}
	ch.forwarded++
	ch.gen = w.gen
	if d.spec.onWorker() {
		if ch.slot.mailbox.postInline(d) { // here when the agent is idle; else queued, as below
			w.rt.workerInline.Add(1)
		}
		return
	}
	ch.slot.mailbox.PostUserMessage(d) // what c.Send(ch.pid, d) does, without the PID's lookup
}

// activate spawns the agent of key with the state it had when it was passivated.
func (w *agentWorker) activate(c actor.Context, key agents.Key, id *messages.AgentId) *agentChild {
	state := w.states[key]
	delete(w.states, key)
	a := &agentActor{rt: w.rt, key: key, agent: Agent{id: id, tenant: key.Tenant, state: state, node: w.rt.node}}
	withMailbox, mb := agentMailboxProps()
	pid := c.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(w.rt.dispatcher), withMailbox))
	ch := &agentChild{pid: pid, slot: &agentSlot{pid: pid, mailbox: mb}}
	w.children[key] = ch
	w.rt.slots.put(key, ch.slot)
	return ch
}

// finish sends a refusal to where d's outcome goes.
func (w *agentWorker) finish(c actor.Context, d *agentDeliver, o *messages.DeliveryOutcome) {
	switch {
	case d.done != nil:
		d.done <- o
	case d.batch != nil:
		d.batch.set(d.idx, o)
	case d.router != nil:
		d.outcome = o
		w.reply(c, d)
	}
}

// takeResults queues the outcomes waiting in the runtime's results intake for their routers.
func (w *agentWorker) takeResults(c actor.Context) {
	w.results = w.rt.results.take(w.results)
	for _, d := range w.results {
		w.reply(c, d)
	}
}

// reply queues the outcome of remote send r (set) for its router; the queue is flushed after
// the current mailbox run.
func (w *agentWorker) reply(c actor.Context, r *agentDeliver) {
	if !r.direct && w.awaiting > 0 {
		w.awaiting--
	}
	rb := w.replyQueue(c, r.router, r.routerKey)
	if rb.n == 0 && r.packed { // the same for every request of a router
		rb.packed, rb.resp.Packed = true, w.room.buffer()
	}
	o := r.outcome
	o.WorkerId = "" // the response names the worker once; the router fills it in
	if rb.packed {
		packed, err := messages.AppendResult(rb.resp.Packed, r.session, o)
		if err != nil { // a reason or content type that is not UTF-8 cannot go out as it is
			o.Reason, o.ContentType = strings.ToValidUTF8(o.Reason, "\uFFFD"), strings.ToValidUTF8(o.ContentType, "\uFFFD")
			if packed, err = messages.AppendResult(rb.resp.Packed, r.session, o); err != nil {
				w.rt.log.Warn("unencodable outcome dropped", zap.Error(err)) // its session ends at its deadline
				return
			}
		}
		rb.resp.Packed = packed
	} else {
		rb.resp.Results = append(rb.resp.Results, &messages.AgentDeliveryResult{Session: r.session, Outcome: o})
	}
	rb.n++
	rb.bytes += len(o.Response)
	if rb.n >= w.rt.cfg.MaxBatch || rb.bytes >= w.rt.cfg.MaxBatchBytes {
		w.send(c, rb)
		delete(w.replies, r.routerKey)
	}
}

// send sends a queued response.
func (w *agentWorker) send(c actor.Context, rb *workerReplies) {
	if rb.packed {
		w.room.sent(len(rb.resp.Packed))
	}
	c.Send(rb.router, rb.resp)
}

// replyQueue returns the queued response to router (key routerKey), creating it, and makes
// sure a flush follows the current mailbox run.
func (w *agentWorker) replyQueue(c actor.Context, router *actor.PID, routerKey string) *workerReplies {
	rb := w.replies[routerKey]
	if rb == nil {
		rb = &workerReplies{router: router, resp: &messages.AgentSendResponse{WorkerId: w.rt.selfID}}
		w.replies[routerKey] = rb
	}
	if !w.flushing {
		w.flushing = true
		c.Send(c.Self(), agentWorkerFlush{})
	}
	return rb
}

// replyHold is how long the worker holds the outcomes of requests of several deliveries while
// more of their deliveries are being handled: their agents answer one by one from their own
// goroutines, and a response per mailbox run of the worker meant one remote message per two
// outcomes or so under load. The outcomes go out once every forwarded delivery is answered, with
// an acknowledgement, when MaxBatch of them are queued, or after replyHold, whichever comes
// first: a slow agent delays its request's other outcomes by replyHold at most. A lone delivery
// is answered by its agent straight to the router and never held.
const replyHold = 500 * time.Microsecond

// acking reports whether a queued response acknowledges requests (it goes out at once: the
// router's send window waits for it).
func (w *agentWorker) acking() bool {
	for _, rb := range w.replies {
		if rb.resp.Requests > 0 {
			return true
		}
	}
	return false
}

// hold arms the delayed flush of the queued outcomes, unless one is armed.
func (w *agentWorker) hold(c actor.Context) {
	if w.held {
		return
	}
	self := c.Self()
	if w.held = w.rt.group.After(replyHold, func() { w.rt.system.Root.Send(self, agentWorkerHeldFlush{}) }); !w.held {
		w.flush(c) // the node is stopping
	}
}

// flush sends the queued outcomes: one AgentSendResponse per router.
func (w *agentWorker) flush(c actor.Context) {
	w.flushing = false
	for k, rb := range w.replies {
		w.send(c, rb)
		delete(w.replies, k)
	}
}

// enqueuePublish forwards a publish batch's deliveries and returns the acknowledgement.
func (w *agentWorker) enqueuePublish(c actor.Context, b *messages.AgentPublishBatch) *messages.AgentPublishAck {
	ack := &messages.AgentPublishAck{WorkerId: w.rt.selfID, Session: b.Session}
	envs := b.Envelopes
	if b.Envelope != nil { // the envelope once, with its recipients
		envs = make([]*messages.MessageEnvelope, 0, len(envs)+len(b.Recipients))
		envs = append(envs, b.Envelopes...)
		for _, id := range b.Recipients {
			envs = append(envs, publishedTo(b.Envelope, id))
		}
	}
	ds := make([]agentDeliver, len(envs)) // one allocation per batch
	for i, env := range envs {
		d := &ds[i]
		*d = agentDeliver{env: env, tenant: env.GetSnapshot().GetTenantId()}
		spec, refused := w.rt.check(env, d.tenant)
		if refused == nil && agents.ValidateAgentID(env.GetRecipient()) != nil {
			refused = agents.Undeliverable(agents.Reason(agents.ReasonNoLiveOwner, "invalid recipient"), w.rt.selfID)
		}
		if refused != nil {
			ack.Reason = refused.Reason
			continue
		}
		d.spec = spec
		w.deliver(c, d)
		ack.Accepted++
	}
	return ack
}

// sweep asks the agents idle for agentIdleSweeps sweeps to passivate. Direct deliveries count
// as activity: an agent whose direct count moved since the last sweep is marked used.
func (w *agentWorker) sweep(c actor.Context) {
	w.gen++
	for _, ch := range w.children {
		if direct := ch.slot.state.Load() &^ slotClosed; direct != ch.seen {
			ch.seen, ch.gen = direct, w.gen
		}
		if !ch.passivating && ch.gen+agentIdleSweeps <= w.gen {
			ch.passivating = true
			ch.seen = ch.slot.close()
			c.Send(ch.pid, agentPassivate{})
		}
	}
}

// passivated stops an agent that handled everything forwarded to it and keeps its state; an
// agent that got deliveries since it was asked stays active.
func (w *agentWorker) passivated(c actor.Context, m *agentPassivated) {
	ch := w.children[m.key]
	if ch == nil {
		return
	}
	if m.processed != ch.forwarded+ch.seen { // deliveries arrived since it was asked
		ch.passivating = false
		ch.slot.reopen()
		return
	}
	delete(w.children, m.key)
	w.rt.slots.remove(m.key)
	if m.state != nil {
		w.states[m.key] = m.state
	}
	c.Stop(ch.pid)
	if w.draining[m.key] {
		delete(w.draining, m.key)
		w.drained(c)
	}
}

// disown forgets the state of every agent whose key table gives to another worker (an owner
// joined, or this worker's types changed): an active agent is told to drop its state after
// what it has queued, a passivated one's state is deleted. An agent whose key comes back here
// later starts with no state, as it does on any owner that newly gets a key; the state it had
// missed what the other owner handled in between.
func (w *agentWorker) disown(c actor.Context, table *agents.Table) {
	owned := func(k agents.Key) bool {
		route := table.Route(k.Tenant, &messages.AgentId{Type: k.Type, Key: k.Key})
		return route.Worker != nil && route.Worker.Self
	}
	for k, ch := range w.children {
		if !owned(k) {
			c.Send(ch.pid, agentReset{})
		}
	}
	for k := range w.states {
		if !owned(k) {
			delete(w.states, k)
		}
	}
}

// drained answers the pending agentDrain once no agent is left to acknowledge, after sending
// the outcomes still queued.
func (w *agentWorker) drained(c actor.Context) {
	if w.drainReply != nil && len(w.draining) == 0 {
		w.takeResults(c)
		w.flush(c)
		c.Send(w.drainReply, true)
		w.drainReply = nil
	}
}
