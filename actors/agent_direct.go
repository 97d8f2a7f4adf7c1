package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// Direct remote sends. A send to a remote worker normally goes through this node's router,
// which batches it with the other sends to that worker. At low load there is nothing to batch,
// and the router's mailbox is one hop more on the round trip: a sender that finds no other
// remote send in flight sends its request to the worker itself, with the router as the sender
// the worker answers, after handing the router the session (agentOpenSession). The router's
// mailbox takes the session before the answer can arrive (it is posted before the request
// leaves), and resolves it as one it sent: outcome, deadline, eviction, stop. The session goes
// through the mailbox, not the sends intake: an item of the intake may be taken after a message
// posted later.

// agentOpenSession asks the router to track the session of a request its caller sent itself.
type agentOpenSession struct {
	id     uint64 // with agents.CallerSessions
	worker string
	env    *messages.MessageEnvelope
	done   chan<- *messages.DeliveryOutcome
}

// agentWorkerPID is the PID of a remote worker, cached by the runtime for direct sends.
type agentWorkerPID struct {
	id, address string
	pid         *actor.PID
}

// sendRemote hands env (tenant's, to remote worker w) to the router, or sends it directly when
// no send is in flight through the router nor directly (a lone sender: nothing to batch). It
// reports whether it went direct; the caller calls endRemote with that once the outcome came
// or it gave up.
func (rt *agentRuntime) sendRemote(env *messages.MessageEnvelope, tenant string, done chan<- *messages.DeliveryOutcome,
	w *agents.WorkerRoute) (direct bool) {
	if rt.routed.Load() > 0 || !rt.directBusy.CompareAndSwap(false, true) {
		rt.routed.Add(1)
		if rt.sends.push(agentRouteSend{env: env, tenant: tenant, done: done}) {
			rt.system.Root.Send(rt.router, agentSendsQueued{})
		}
		return false
	}
	id := agents.CallerSessions | rt.directIDs.Add(1)
	rt.system.Root.Send(rt.router, &agentOpenSession{id: id, worker: w.ID, env: env, done: done})
	req := &messages.AgentSendRequest{RouterId: rt.selfID, Deliveries: []*messages.AgentDelivery{{Session: id, Envelope: env}}}
	rt.system.Root.RequestWithCustomSender(rt.workerPID(w), req, rt.router)
	return true
}

// endRemote ends a send of sendRemote.
func (rt *agentRuntime) endRemote(direct bool) {
	if direct {
		rt.directBusy.Store(false)
	} else {
		rt.routed.Add(-1)
	}
}

// workerPID returns the worker actor of remote worker w (the last one is cached).
func (rt *agentRuntime) workerPID(w *agents.WorkerRoute) *actor.PID {
	if c := rt.lastWorker.Load(); c != nil && c.id == w.ID && c.address == w.Address {
		return c.pid
	}
	c := &agentWorkerPID{id: w.ID, address: w.Address, pid: actor.NewPID(w.Address, agentPIDName(w.NodeID)+"/worker")}
	rt.lastWorker.Store(c)
	return c.pid
}

// openSession tracks the session of a direct send, or answers it at once when the router is
// stopping or no longer routes to its worker (an answer from the worker then finds no session
// and is dropped).
func (r *agentRouter) openSession(m *agentOpenSession) {
	switch {
	case r.stopping:
		m.done <- agents.Undeliverable(agents.Reason(agents.ReasonStopping, "node %s is stopping", r.rt.nodeID), m.worker)
	case r.table.Worker(m.worker) == nil:
		m.done <- agents.Undeliverable(agents.Reason(agents.ReasonWorkerEvicted, "worker %s left before the message went out",
			m.worker), m.worker)
	default:
		err := r.sessions.OpenID(m.id, m.worker, routerCall{send: m.done}, time.Now(), time.Unix(0, m.env.Deadline), r.rt.cfg.RPCTimeout)
		if err != nil { // not reachable: the runtime's ids are unique
			r.rt.log.Error("open a direct send's session", zap.Error(err))
			m.done <- agents.Failed(err.Error(), m.worker)
			return
		}
		r.count(m.worker, 0)
	}
}
