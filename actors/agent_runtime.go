package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// agentTick is how often the router expires sessions; timeouts resolve within it.
const agentTick = 10 * time.Millisecond

// agentRuntime is a node's agent runtime outside the actors: the catalog (types, subscriptions)
// that the worker serves, the routing table the router publishes, and the callers' side of
// send and publish. It is goroutine-safe.
//
// Supervision: a supervisor actor "agents-<node>" with two children, "worker" (agent_worker.go,
// hosting the agents as its children) and "router" (agent_router.go); one-for-one, restart each
// up to 10 times a minute. A restarted router fails its pending sessions (no caller waits
// forever) and rebuilds its directory from membership and registrations; the catalog lives here,
// so a restarted worker serves the same types and subscriptions.
type agentRuntime struct {
	node    *Node
	system  *actor.ActorSystem
	log     *zap.Logger
	cfg     agents.Config
	members *cluster.Membership // nil without a cluster
	selfID  string              // worker id: the member (actor system) id
	nodeID  string
	group   *workgroup.Group // the node's: the ticks and the membership watcher run in it
	// life is the runtime's own group: handler contexts derive from its stop context, which
	// Stop cancels once the drain is over or its time ran out.
	life *workgroup.Group
	// dispatcher runs the agent actors' mailboxes on goroutines of the node's group, which
	// Node.Stop stops after the agent actors.
	dispatcher *agentDispatcher
	sup        *actor.PID
	router     *actor.PID
	worker     *actor.PID

	table atomic.Pointer[agents.Table]
	slots *agentSlots // active agents, for direct local deliveries
	// deadlines wakes the local callers whose deadline passed (no timer per send).
	deadlines *deadlineWheel
	msgs      atomic.Uint64

	// catalog is the current catalog; catMu serializes its writers.
	catalog atomic.Pointer[agentCatalog]
	catMu   sync.Mutex

	// directBusy is set while a direct remote send is in flight and routed counts the remote
	// sends in flight through the router (agent_direct.go); directIDs numbers the direct sends'
	// sessions; lastWorker caches the PID of the last worker sent to.
	directBusy atomic.Bool
	routed     atomic.Int64
	directIDs  atomic.Uint64
	lastWorker atomic.Pointer[agentWorkerPID]

	// sends queues the remote sends for the router, results the outcomes of remote sends for
	// the worker (agent_intake.go): one mailbox message per burst instead of one per item.
	sends   agentIntake[agentRouteSend]
	results agentIntake[*agentDeliver]

	// batchMu guards batches: the SendAgentBatch calls waiting, failed at stop.
	batchMu sync.Mutex
	batches map[*agentBatch]struct{}

	accepting atomic.Bool  // new sends and publishes are taken
	inflight  atomic.Int64 // facade calls in progress
	// inlineRuns counts the local sends handled on their caller's goroutine (postInline), and
	// workerInline the deliveries of non-blocking types handled on the worker's.
	inlineRuns, workerInline atomic.Uint64
	stopped                  chan struct{}
	stopOnce                 sync.Once
	stopTicks                []func()
}

// agentCatalog is one immutable version of the worker's catalog.
type agentCatalog struct {
	version uint64
	types   map[string]*agentTypeSpec
	subs    []*messages.Subscription
	leaving bool
	reg     *messages.AgentWorkerRegistration
}

// agentPIDName is the supervisor's name; workers and routers are its "worker" and "router".
func agentPIDName(nodeID string) string { return "agents-" + nodeID }

// startAgents starts the node's agent runtime: validates the configuration, spawns the
// supervisor, publishes the catalog with the configured built-in types to the local router (so
// the first send already routes), advertises the types in the node meta and starts the
// membership watcher and the ticks. It blocks until the local router knows this worker.
func (n *Node) startAgents(ctx context.Context) error {
	e := n.env
	if err := e.cfg.Agents.Validate(); err != nil {
		return fmt.Errorf("actors: config: %w", err)
	}
	rt := &agentRuntime{node: n, system: e.system, log: e.log.Named("agents"), cfg: e.cfg.Agents.WithDefaults(),
		members: e.cfg.Cluster, selfID: e.incarnation, nodeID: e.nodeID, group: e.group, life: workgroup.New(), stopped: make(chan struct{})}
	rt.dispatcher = e.mailboxes // the node's pool, rotated by the node
	rt.slots = newAgentSlots()
	rt.deadlines = newDeadlineWheel(time.Now())
	cat := &agentCatalog{version: 1, types: map[string]*agentTypeSpec{}}
	for _, name := range e.cfg.AgentTypes {
		h, ok := builtinAgents[name]
		if !ok {
			return fmt.Errorf("%w: %q (want %s or %s)", ErrUnknownBuiltinAgent, name, AgentEcho, AgentCounter)
		}
		cat.types[name] = &agentTypeSpec{name: name, handler: h, nonBlocking: true}
	}
	rt.setCatalogLocked(cat)
	rt.table.Store(agents.NewDirectory(rt.cfg, agents.Member{ID: rt.selfID, NodeID: rt.nodeID}).Table())
	pids := make(chan [2]*actor.PID, 1)
	props := actor.PropsFromProducer(func() actor.Actor { return &agentSupervisor{rt: rt, started: pids} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)))
	sup, err := e.system.Root.SpawnNamed(props, agentPIDName(rt.nodeID))
	if err != nil {
		return fmt.Errorf("actors: spawn agent runtime: %w", err)
	}
	rt.sup = sup
	select {
	case p := <-pids:
		rt.worker, rt.router = p[0], p[1]
	case <-ctx.Done():
		return errors.Join(ctx.Err(), e.system.Root.StopFuture(sup).Wait())
	}
	n.agents = rt
	rt.accepting.Store(true)
	rt.stopTicks = append(rt.stopTicks,
		e.group.Tick(agentTick, func() { rt.system.Root.Send(rt.router, agentTickMsg{}) }),
		e.group.Tick(deadlineTick, func() { rt.deadlines.advance(time.Now()) }),
		e.group.Tick(rt.cfg.IdleTimeout/2, func() { rt.system.Root.Send(rt.worker, agentSweepMsg{}) }))
	if rt.members != nil {
		rt.stopTicks = append(rt.stopTicks,
			e.group.Tick(rt.cfg.HealthInterval, func() { rt.system.Root.Send(rt.router, agentHealthTickMsg{}) }))
		e.group.Go(rt.watchMembers)
	}
	return rt.announce(ctx)
}

// peerAckWait bounds how long announce waits for the other members' routers to acknowledge a
// catalog. A member that died but is still listed (failure detection takes a second or more)
// never answers: protoactor fails the request only after its connect retries (about 10 s), and
// that wait used to hold a node's start (a replacement process host joining right after a
// crash) and its stop (a process host whose control plane was killed) for the whole time.
// Routers that miss the push learn the catalog from the node meta and their probes.
const peerAckWait = time.Second

// announce publishes the current catalog: to the local router (waiting for it), in the node
// meta and to the routers of the other members (waiting for their acknowledgement at most
// peerAckWait, or until ctx ends or the RPC timeout passes; the others learn it from their
// probes).
func (rt *agentRuntime) announce(ctx context.Context) error {
	cat := rt.catalog.Load()
	timeout := rt.cfg.RPCTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	peerTimeout := min(timeout, peerAckWait)
	if _, err := rt.system.Root.RequestFuture(rt.router, cat.reg, timeout).Result(); err != nil {
		return fmt.Errorf("actors: register agent catalog with the local router: %w", err)
	}
	if rt.members == nil {
		return nil
	}
	var names []string
	if !cat.leaving {
		for name := range cat.types {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	if err := rt.members.SetAgentTypes(names); err != nil && !errors.Is(err, cluster.ErrShutdown) {
		rt.log.Warn("advertise agent types in the node meta", zap.Error(err))
	}
	var futures []*actor.Future
	for _, m := range rt.members.Members() {
		if m.ID != rt.selfID {
			pid := actor.NewPID(m.Address, agentPIDName(m.NodeID)+"/router")
			futures = append(futures, rt.system.Root.RequestFuture(pid, cat.reg, peerTimeout))
		}
	}
	for _, f := range futures {
		if _, err := f.Result(); err != nil {
			rt.log.Debug("push agent registration to a router", zap.Error(err))
		}
	}
	return nil
}

// check returns the type serving a delivery of tenant to env's recipient, or the outcome
// refusing it: no tenant, a type this worker does not own, a tenant the type excludes.
func (rt *agentRuntime) check(env *messages.MessageEnvelope, tenant string) (*agentTypeSpec, *messages.DeliveryOutcome) {
	if tenant == "" {
		return nil, agents.Undeliverable(agents.Reason(agents.ReasonMissingTenant, "the message has no snapshot tenant"), rt.selfID)
	}
	typ := env.GetRecipient().GetType()
	spec := rt.catalog.Load().types[typ]
	if spec == nil {
		return nil, agents.Undeliverable(agents.Reason(agents.ReasonTypeNotRegistered, "worker %s does not own agent type %q",
			rt.selfID, typ), rt.selfID)
	}
	if !agents.TenantAllowed(spec.tenants, tenant) {
		return nil, agents.Undeliverable(agents.Reason(agents.ReasonTenantRefused, "tenant %q may not reach agents of type %q",
			tenant, typ), rt.selfID)
	}
	return spec, nil
}

// messageID returns a new envelope id, unique across processes (the worker id) and cheap.
func (rt *agentRuntime) messageID() string {
	var n [13]byte // a uint64 in base 36
	num := strconv.AppendUint(n[:0], rt.msgs.Add(1), 36)
	var b strings.Builder // one allocation
	b.Grow(len("msg-") + len(rt.selfID) + 1 + len(num))
	b.WriteString("msg-")
	b.WriteString(rt.selfID)
	b.WriteByte('-')
	b.Write(num)
	return b.String()
}

// assignIDs gives every envelope of envs without an id a new one (as messageID), all cut from
// one string: one allocation for the batch.
func (rt *agentRuntime) assignIDs(envs []*messages.MessageEnvelope) {
	k := 0
	for _, e := range envs {
		if e.Id == "" {
			k++
		}
	}
	if k == 0 {
		return
	}
	first := rt.msgs.Add(uint64(k)) - uint64(k) + 1
	var n [13]byte
	var b strings.Builder
	b.Grow(k * (len("msg-") + len(rt.selfID) + 1 + 4))
	for i := range uint64(k) {
		b.WriteString("msg-")
		b.WriteString(rt.selfID)
		b.WriteByte('-')
		b.Write(strconv.AppendUint(n[:0], first+i, 36))
	}
	all, at, i := b.String(), 0, first
	for _, e := range envs {
		if e.Id == "" {
			end := at + len("msg-") + len(rt.selfID) + 1 + len(strconv.AppendUint(n[:0], i, 36))
			e.Id, at, i = all[at:end], end, i+1
		}
	}
}

// setCatalogLocked publishes cat with its registration (catMu held, or before start).
func (rt *agentRuntime) setCatalogLocked(cat *agentCatalog) {
	reg := &messages.AgentWorkerRegistration{WorkerId: rt.selfID, NodeId: rt.nodeID, Address: rt.system.Address(),
		Version: cat.version, Subscriptions: cat.subs, Leaving: cat.leaving, PublishRecipients: true, PackedSends: true}
	for _, name := range sortedKeys(cat.types) {
		reg.Types = append(reg.Types, &messages.AgentType{Name: name, Tenants: cat.types[name].tenants})
	}
	cat.reg = reg
	rt.catalog.Store(cat)
}

// updateCatalog applies fn to a copy of the catalog, publishes it as the next version and
// announces it.
func (rt *agentRuntime) updateCatalog(ctx context.Context, fn func(*agentCatalog) error) error {
	if rt == nil || !rt.accepting.Load() {
		return ErrAgentsStopped
	}
	rt.catMu.Lock()
	old := rt.catalog.Load()
	next := &agentCatalog{version: old.version + 1, types: make(map[string]*agentTypeSpec, len(old.types)),
		subs: slices.Clone(old.subs), leaving: old.leaving}
	for k, v := range old.types {
		next.types[k] = v
	}
	if err := fn(next); err != nil {
		rt.catMu.Unlock()
		return err
	}
	rt.setCatalogLocked(next)
	rt.catMu.Unlock()
	return rt.announce(ctx)
}

func (rt *agentRuntime) registerType(ctx context.Context, spec *agentTypeSpec) error {
	return rt.updateCatalog(ctx, func(c *agentCatalog) error {
		if _, dup := c.types[spec.name]; dup {
			return fmt.Errorf("%w: %s", ErrAgentTypeExists, spec.name)
		}
		c.types[spec.name] = spec
		return nil
	})
}

func (rt *agentRuntime) changeSubscriptions(ctx context.Context, add []*messages.Subscription, remove []string) error {
	return rt.updateCatalog(ctx, func(c *agentCatalog) error {
		if len(remove) > 0 {
			c.subs = slices.DeleteFunc(c.subs, func(s *messages.Subscription) bool { return slices.Contains(remove, s.Id) })
		}
		c.subs = append(c.subs, add...)
		return nil
	})
}

// watchMembers feeds membership changes and lost remote endpoints to the router until the
// node stops.
func (rt *agentRuntime) watchMembers(ctx context.Context) {
	events, cancel := rt.members.Subscribe(64)
	defer cancel()
	sub := rt.system.EventStream.Subscribe(func(evt any) {
		if ev, ok := evt.(*remote.EndpointTerminatedEvent); ok {
			rt.system.Root.Send(rt.router, &agentEndpointDown{address: ev.Address})
		}
	})
	defer rt.system.EventStream.Unsubscribe(sub)
	rt.system.Root.Send(rt.router, &agentMembersMsg{members: rt.memberList()})
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				return
			}
			rt.system.Root.Send(rt.router, &agentMembersMsg{members: rt.memberList()})
		}
	}
}

// memberList converts the alive members for the directory.
func (rt *agentRuntime) memberList() []agents.Member {
	ms := rt.members.Members()
	out := make([]agents.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, agents.Member{ID: m.ID, NodeID: m.NodeID, Address: m.Address, Types: m.AgentTypes})
	}
	return out
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
