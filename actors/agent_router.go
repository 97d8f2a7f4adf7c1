package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// agentRouter is a node's agent router (seed 003's host role, on every node): it owns the
// worker directory (agents.Directory: membership, registrations, health) and the pending-session
// table of the sends and publish batches it forwards, and publishes the routing table for the
// node's callers. Sends to remote workers are batched per worker: a batch goes out at the end
// of a mailbox run while fewer than sendWindow requests to that worker are unacknowledged, and
// is held (growing) otherwise, until an acknowledgement or the next tick; each
// publish is resolved once and sent as one batch per destination worker. Every request to a
// worker has a session bounded by its deadline and the RPC timeout, and is resolved when the
// worker is evicted or leaves, so nothing waits on a lost message.
type agentRouter struct {
	rt       *agentRuntime
	worker   *actor.PID // this node's worker
	dir      *agents.Directory
	table    *agents.Table
	sessions *agents.Sessions[routerCall]
	pids     map[string]*actor.PID // worker id -> worker PID
	batches  map[string]*routerBatch
	flushing bool // an agentFlush is queued
	// unacked counts the send requests per worker not acknowledged yet; held marks the batches
	// a tick already saw waiting (the next tick sends them whatever the window).
	unacked  map[string]int
	held     map[string]bool
	probing  map[string]bool
	stopping bool
	// sent counts the requests sent to each worker (AgentWorkerInfo.SendBatches, PublishBatches).
	sent map[string]*[2]uint64
	// in are the sends taken from the runtime's intake, in[inNext:] not routed yet (failed if
	// the router stops or restarts before it routes them).
	in     []agentRouteSend
	inNext int
	// room sizes the packed batches.
	room packRoom
}

// routerCall is what a session answers: a send's caller, a delivery of a batch (batch, idx)
// or a publish.
type routerCall struct {
	send    chan<- *messages.DeliveryOutcome
	batch   *agentBatch
	idx     int
	publish *routerPublish
}

// routerPublish is a publish waiting for the acknowledgements of its batches.
type routerPublish struct {
	remaining, delivered int
	done                 chan<- publishResult
}

// routerBatch is the send request being built for one worker: its deliveries packed as they
// come for a worker that registered packed_sends (messages.AppendDelivery), in Deliveries
// otherwise; the session of each, in order; and the payload bytes it carries (it goes out at
// Config.MaxBatch deliveries or Config.MaxBatchBytes).
type routerBatch struct {
	req      *messages.AgentSendRequest
	packs    bool
	sessions []uint64
	bytes    int
}

// packRoom sizes the buffers of the packed batches (router) or responses (worker) an actor
// builds: a new one starts with the room of the largest sent lately, at least packHint (a
// buffer is sent as it is: its bytes cannot be reused). The zero value is ready.
type packRoom int

// packHint is the least room a new packed buffer starts with.
const packHint = 4 << 10

// buffer returns an empty buffer with the room of the ones sent lately.
func (p packRoom) buffer() []byte { return make([]byte, 0, max(int(p), packHint)) }

// sent records the size n of a buffer that went out: the room follows the sizes up at once and
// down slowly.
func (p *packRoom) sent(n int) { *p = packRoom(max(n, int(*p)-int(*p)/8)) }

// agentFlush makes the router send the batches built during one mailbox run.
type agentFlush struct{}

// sendWindow is the number of unacknowledged send requests per worker past which the router
// holds new deliveries in one growing batch: one request in flight per worker keeps a lone
// sender's round trip as it is and turns many concurrent senders into large batches.
const sendWindow = 1

// ackedBatch is the smallest send request the worker acknowledges and the router counts in its
// window: a lone delivery goes out, and comes back, without an extra acknowledgement message.
const ackedBatch = 2

func newAgentRouter(rt *agentRuntime, worker *actor.PID) *agentRouter {
	return &agentRouter{rt: rt, worker: worker}
}

func (r *agentRouter) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		r.start(c)
		r.takeSends(c) // those queued while the router restarted
	case agentSendsQueued:
		r.takeSends(c)
	case *agentRouteBatch:
		r.routeBatch(c, m)
	case *agentOpenSession:
		r.openSession(m)
	case agentFlush:
		r.flush(c)
	case *messages.AgentSendResponse:
		r.acked(c, m.WorkerId, int(m.Requests))
		for _, res := range m.Results {
			r.resolve(res.Session, res.Outcome)
		}
		if len(m.Packed) > 0 {
			sessions, outs, err := messages.UnpackResultList(m.Packed)
			if err != nil { // their sessions end at their deadlines
				r.rt.log.Warn("undecodable send response dropped", zap.String("worker_id", m.WorkerId), zap.Error(err))
			}
			for i, id := range sessions {
				r.resolve(id, outs[i])
			}
		}
	case *agentPublishCall:
		r.publish(c, m)
	case *messages.AgentPublishAck:
		if s, ok := r.sessions.Resolve(m.Session, agents.Delivered(nil, "", m.WorkerId)); ok {
			if s.Value.publish != nil {
				s.Value.publish.delivered += int(m.Accepted)
			}
			r.answer(s)
		}
	case agentTickMsg:
		r.expire()
		r.flushHeld(c)
	case agentHealthTickMsg:
		for _, w := range r.dir.ProbeTargets() {
			r.probe(c, w.ID)
		}
	case *agentEndpointDown:
		r.probeAt(c, m.address)
	case *actor.DeadLetterResponse: // a request went to a worker whose endpoint is gone
		if m.Target != nil {
			r.probeAt(c, m.Target.Address)
		}
	case *agentMembersMsg:
		r.setMembers(c, m.members)
	case *messages.AgentWorkerRegistration:
		if r.dir.Register(m) {
			r.publishTable()
		}
		c.Respond(&messages.AgentRegistrationAck{RouterId: r.rt.selfID, Version: m.Version})
	case agentStopRouting:
		r.stopping = true
		r.failAll("node " + r.rt.nodeID + " is stopping")
		c.Respond(true)
	case agentDirectoryReq:
		c.Respond(r.view())
	case *actor.Restarting: // the next instance routes what is still in the intake
		r.failAll("the agent router of node " + r.rt.nodeID + " stopped")
	case *actor.Stopping:
		r.failAll("the agent router of node " + r.rt.nodeID + " stopped")
		r.failSends(r.rt.sends.take(nil), "the agent router of node "+r.rt.nodeID+" stopped")
	}
}

// takeSends routes the sends queued in the runtime's intake.
func (r *agentRouter) takeSends(c actor.Context) {
	r.in, r.inNext = r.rt.sends.take(r.in), 0 // every send of the previous take was routed
	for r.inNext < len(r.in) {
		m := &r.in[r.inNext]
		r.inNext++
		r.routeSend(c, m)
	}
}

// testHookRouteSend, when set (by tests, before the node starts), is called as the router
// begins to route a send.
var testHookRouteSend func(*agentRouteSend)

// failSends answers sends UNDELIVERABLE (ReasonStopping, why).
func (r *agentRouter) failSends(sends []agentRouteSend, why string) {
	for i := range sends {
		sends[i].done <- agents.Undeliverable(agents.Reason(agents.ReasonStopping, "%s", why), "")
	}
}

// start builds the directory: this worker's registration (from the runtime's catalog), the
// current members, and probes that fetch the other workers' registrations.
func (r *agentRouter) start(c actor.Context) {
	rt := r.rt
	r.dir = agents.NewDirectory(rt.cfg, agents.Member{ID: rt.selfID, NodeID: rt.nodeID, Address: rt.system.Address()})
	r.sessions = agents.NewSessions[routerCall]()
	r.pids = map[string]*actor.PID{rt.selfID: r.worker}
	r.batches = map[string]*routerBatch{}
	r.unacked, r.held = map[string]int{}, map[string]bool{}
	r.probing = map[string]bool{}
	r.sent = map[string]*[2]uint64{}
	r.dir.Register(rt.catalog.Load().reg)
	if rt.members != nil {
		r.setMembers(c, rt.memberList())
	}
	r.publishTable()
}

// publishTable rebuilds the routing table and publishes it to the node's callers.
func (r *agentRouter) publishTable() {
	r.table = r.dir.Table()
	r.rt.table.Store(r.table)
	if r.worker != nil {
		r.rt.system.Root.Send(r.worker, &agentOwnersChanged{table: r.table})
	}
	for id := range r.pids {
		if id != r.rt.selfID && r.table.Worker(id) == nil {
			delete(r.pids, id)
		}
	}
	for id := range r.unacked {
		if r.table.Worker(id) == nil {
			delete(r.unacked, id) // a worker that comes back starts with an open window
		}
	}
}

// pid returns the worker actor of worker w.
func (r *agentRouter) pid(w *agents.WorkerRoute) *actor.PID {
	if w.Self {
		return r.worker
	}
	p := r.pids[w.ID]
	if p == nil || p.Address != w.Address {
		p = actor.NewPID(w.Address, agentPIDName(w.NodeID)+"/worker")
		r.pids[w.ID] = p
	}
	return p
}

func (r *agentRouter) routeSend(c actor.Context, m *agentRouteSend) {
	if testHookRouteSend != nil {
		testHookRouteSend(m)
	}
	if r.stopping {
		m.done <- agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s is stopping", r.rt.nodeID), "")
		return
	}
	route := r.table.Route(m.tenant, m.env.Recipient)
	switch {
	case route.Worker == nil:
		m.done <- agents.Undeliverable(route.Reason, "")
	case route.Worker.Self: // the table changed since the caller looked
		c.Send(r.worker, &agentLocalSend{env: m.env, tenant: m.tenant, done: m.done})
	default:
		r.enqueue(c, route.Worker, m.env, routerCall{send: m.done}, time.Now())
	}
}

// enqueue opens a session for env to worker w and adds it to w's batch, sending the batch when
// it is full and making sure a flush follows the mailbox run while w's window is open.
func (r *agentRouter) enqueue(c actor.Context, w *agents.WorkerRoute, env *messages.MessageEnvelope, call routerCall, now time.Time) {
	id := r.sessions.Open(w.ID, call, now, time.Unix(0, env.Deadline), r.rt.cfg.RPCTimeout)
	b := r.batches[w.ID]
	if b == nil {
		b = &routerBatch{req: &messages.AgentSendRequest{RouterId: r.rt.selfID, PackedResults: true}}
		if dw, ok := r.dir.Worker(w.ID); ok && dw.Registration.GetPackedSends() {
			b.packs, b.req.Packed = true, r.room.buffer()
		}
		r.batches[w.ID] = b
	}
	if b.packs {
		packed, err := messages.AppendDelivery(b.req.Packed, id, env)
		if err != nil { // a string that is not UTF-8: it cannot go out
			r.resolve(id, agents.Failed(fmt.Sprintf("agents: the message cannot be encoded: %v", err), w.ID))
			return
		}
		b.req.Packed = packed
	} else {
		b.req.Deliveries = append(b.req.Deliveries, &messages.AgentDelivery{Session: id, Envelope: env})
	}
	b.sessions = append(b.sessions, id)
	b.bytes += len(env.Payload)
	if len(b.sessions) >= r.rt.cfg.MaxBatch || b.bytes >= r.rt.cfg.MaxBatchBytes {
		r.sendBatch(c, w.ID, b, w)
		return
	}
	if !r.flushing && r.unacked[w.ID] < sendWindow {
		r.flushing = true
		c.Send(c.Self(), agentFlush{})
	}
}

// sendBatch sends worker id its batch b (w: its route) and counts it unacknowledged.
func (r *agentRouter) sendBatch(c actor.Context, id string, b *routerBatch, w *agents.WorkerRoute) {
	r.count(id, 0)
	if len(b.sessions) >= ackedBatch {
		r.unacked[id]++
	}
	if b.packs {
		r.room.sent(len(b.req.Packed))
	}
	c.Request(r.pid(w), b.req)
	delete(r.batches, id)
	delete(r.held, id)
}

// acked applies a worker's acknowledgement of n send requests and sends the batch held for it
// when its window opened.
func (r *agentRouter) acked(c actor.Context, id string, n int) {
	if n == 0 {
		return
	}
	r.unacked[id] = max(r.unacked[id]-n, 0)
	if r.batches[id] != nil && r.unacked[id] < sendWindow && !r.flushing {
		r.flushing = true
		c.Send(c.Self(), agentFlush{})
	}
}

// flushHeld sends the batches that already waited a whole tick, window or not (a lost
// acknowledgement or a worker of an older version delays deliveries by one tick at most), and
// marks the others.
func (r *agentRouter) flushHeld(c actor.Context) {
	for id := range r.batches {
		if !r.held[id] {
			r.held[id] = true
			continue
		}
		r.unacked[id] = 0
		r.flushing = true // flush's own pass, below, clears it
	}
	if r.flushing {
		r.flush(c)
	}
}

// flush sends the batches built since the last flush to the workers whose window is open: one
// request per worker. A batch for a worker that left resolves its sessions.
func (r *agentRouter) flush(c actor.Context) {
	r.flushing = false
	for id, b := range r.batches {
		if w := r.table.Worker(id); w != nil {
			if r.unacked[id] < sendWindow {
				r.sendBatch(c, id, b, w)
			}
		} else {
			for _, session := range b.sessions { // the worker left since: its sessions were resolved
				r.resolve(session, agents.Undeliverable(agents.Reason(agents.ReasonWorkerEvicted,
					"worker %s left before the message went out", id), id))
			}
			delete(r.batches, id)
			delete(r.held, id)
		}
	}
}

// publish resolves the tenant's subscriptions once and sends one batch per destination worker.
func (r *agentRouter) publish(c actor.Context, m *agentPublishCall) {
	if r.stopping {
		m.done <- publishResult{err: ErrAgentsStopped}
		return
	}
	plan := agents.Resolve(r.dir.Index(), r.table, m.tenant, m.env.Topic)
	if len(plan.Refused) > 0 {
		r.rt.log.Debug("publish: recipients refused", zap.Int("refused", len(plan.Refused)), zap.String("first", plan.Refused[0].Reason))
	}
	if len(plan.Workers) == 0 {
		m.done <- publishResult{}
		return
	}
	p := &routerPublish{remaining: len(plan.Workers), done: m.done}
	now := time.Now()
	var deadline time.Time
	if m.env.Deadline != 0 {
		deadline = time.Unix(0, m.env.Deadline)
	}
	for _, wid := range plan.Workers {
		batch := r.publishBatch(wid, m.env, plan.ByWorker[wid])
		batch.Session = r.sessions.Open(wid, routerCall{publish: p}, now, deadline, r.rt.cfg.RPCTimeout)
		r.count(wid, 1)
		c.Request(r.pid(r.table.Worker(wid)), batch)
	}
}

// publishBatch builds worker wid's batch of env for recips: env once with the recipients for a
// worker that takes that form, one envelope per recipient otherwise. env and recips are shared,
// not modified.
func (r *agentRouter) publishBatch(wid string, env *messages.MessageEnvelope, recips []*messages.AgentId) *messages.AgentPublishBatch {
	batch := &messages.AgentPublishBatch{RouterId: r.rt.selfID}
	if w, ok := r.dir.Worker(wid); ok && w.Registration.GetPublishRecipients() {
		batch.Envelope, batch.Recipients = env, recips
		return batch
	}
	batch.Envelopes = make([]*messages.MessageEnvelope, len(recips))
	for i, id := range recips {
		batch.Envelopes[i] = publishedTo(env, id)
	}
	return batch
}

// publishedTo returns the copy of published envelope e for recipient id (fields shared).
func publishedTo(e *messages.MessageEnvelope, id *messages.AgentId) *messages.MessageEnvelope {
	return &messages.MessageEnvelope{Id: e.Id, Sender: e.Sender, Recipient: id, Topic: e.Topic,
		Payload: e.Payload, ContentType: e.ContentType, Snapshot: e.Snapshot, Deadline: e.Deadline}
}

// count counts one request to worker: kind 0 a send batch, 1 a publish batch.
func (r *agentRouter) count(worker string, kind int) {
	c := r.sent[worker]
	if c == nil {
		c = new([2]uint64)
		r.sent[worker] = c
	}
	c[kind]++
}

// resolve applies a worker's outcome o to session id, answering its caller if it was pending.
func (r *agentRouter) resolve(id uint64, o *messages.DeliveryOutcome) {
	if s, ok := r.sessions.Resolve(id, o); ok {
		r.answer(s)
	}
}

// answer hands a resolved session to its caller.
func (r *agentRouter) answer(s agents.Resolution[routerCall]) {
	if s.Outcome.WorkerId == "" {
		s.Outcome.WorkerId = s.Worker
	}
	switch {
	case s.Value.send != nil:
		s.Value.send <- s.Outcome
		return
	case s.Value.batch != nil:
		s.Value.batch.set(s.Value.idx, s.Outcome)
		return
	}
	p := s.Value.publish
	if p.remaining--; p.remaining == 0 {
		p.done <- publishResult{deliveries: p.delivered}
	}
}

// expire times out sessions past their deadline and marks workers that missed the RPC timeout
// unhealthy (evicting those that reach the failure threshold).
func (r *agentRouter) expire() {
	timeouts, sick := r.sessions.Expire(time.Now())
	for _, s := range timeouts {
		r.answer(s)
	}
	changed := false
	for _, w := range sick {
		changed = true
		r.rt.log.Warn("agent worker missed the RPC timeout", zap.String("worker", w), zap.Duration("rpc_timeout", r.rt.cfg.RPCTimeout))
		if r.dir.RPCTimedOut(w) {
			r.evict(w, fmt.Sprintf("missed the RPC timeout (%v)", r.rt.cfg.RPCTimeout))
		}
	}
	if changed {
		r.publishTable()
	}
}

// probe sends one health probe to worker id unless one is in flight; the answer comes back
// into the router's mailbox.
func (r *agentRouter) probe(c actor.Context, id string) {
	w, ok := r.dir.Worker(id)
	if !ok || w.Self || r.probing[id] || w.Address == "" {
		return
	}
	r.probing[id] = true
	pid := actor.NewPID(w.Address, agentPIDName(w.NodeID)+"/worker")
	f := c.RequestFuture(pid, &messages.AgentHealthProbe{RouterId: r.rt.selfID, KnownVersion: r.dir.KnownVersion(id)}, r.rt.cfg.ProbeTimeout())
	c.ReenterAfter(f, func(res any, err error) {
		delete(r.probing, id)
		reply, ok := res.(*messages.AgentHealthReply)
		if err != nil || !ok || reply.WorkerId != id {
			if r.dir.ProbeFailed(id) {
				r.evict(id, fmt.Sprintf("failed %d consecutive health probes", r.rt.cfg.FailureThreshold))
			}
			r.publishTable()
			return
		}
		r.dir.ProbeSucceeded(id, int(reply.ActiveAgents))
		if reply.Registration != nil {
			r.dir.Register(reply.Registration)
		}
		r.publishTable()
	})
}

// probeAt probes the workers at actor address addr at once.
func (r *agentRouter) probeAt(c actor.Context, addr string) {
	for _, w := range r.dir.ProbeTargets() {
		if w.Address == addr {
			r.probe(c, w.ID)
		}
	}
}

// evict drops worker id from routing and resolves its pending sessions as UNDELIVERABLE.
func (r *agentRouter) evict(id, why string) {
	if !r.dir.Evict(id) {
		return
	}
	r.rt.log.Warn("agent worker evicted", zap.String("worker", id), zap.String("why", why))
	for _, s := range r.sessions.EvictWorker(id, why) {
		r.answer(s)
	}
	r.publishTable()
}

// setMembers applies the alive member set; members that left have their sessions resolved as
// UNDELIVERABLE, new ones are probed at once (which fetches their registration).
func (r *agentRouter) setMembers(c actor.Context, ms []agents.Member) {
	for _, id := range r.dir.SetMembers(ms) {
		r.rt.log.Info("agent worker left the cluster", zap.String("worker", id))
		for _, s := range r.sessions.EvictWorker(id, "left the cluster") {
			r.answer(s)
		}
	}
	r.publishTable()
	for _, w := range r.dir.ProbeTargets() {
		if w.Registration == nil {
			r.probe(c, w.ID)
		}
	}
}

// failAll resolves every pending session, and the sends taken from the intake and not routed
// yet, as UNDELIVERABLE (stopping).
func (r *agentRouter) failAll(why string) {
	r.failSends(r.in[r.inNext:], why)
	r.in, r.inNext = nil, 0
	if r.sessions == nil {
		return
	}
	for _, s := range r.sessions.FailAll(why) {
		r.answer(s)
	}
}

// view returns the router's directory for AgentDirectory.
func (r *agentRouter) view() *AgentDirectory {
	d := &AgentDirectory{PendingSessions: r.sessions.Pending()}
	for _, t := range r.table.Types() {
		d.Types = append(d.Types, AgentTypeInfo{Name: t, Owners: r.table.Owners(t)})
	}
	for _, w := range r.dir.Workers() {
		info := AgentWorkerInfo{ID: w.ID, NodeID: w.NodeID, Address: w.Address, Self: w.Self, ActiveAgents: w.ActiveAgents,
			Failures: w.Failures, Unhealthy: w.Unhealthy, Evicted: w.Evicted, Leaving: w.Leaving,
			Subscriptions: len(w.Registration.GetSubscriptions())}
		if c := r.sent[w.ID]; c != nil {
			info.SendBatches, info.PublishBatches = c[0], c[1]
		}
		info.Types = append(info.Types, w.MetaTypes...)
		for _, t := range w.Registration.GetTypes() {
			info.Types = append(info.Types, t.Name)
		}
		slices.Sort(info.Types)
		info.Types = slices.Compact(info.Types)
		d.Workers = append(d.Workers, info)
	}
	return d
}
