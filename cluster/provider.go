package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

var _ pcluster.ClusterProvider = (*Provider)(nil)

// Provider is a protoactor-go ClusterProvider on hashicorp/memberlist. The memberlist node name
// is the actor system id; the node meta carries the logical node id, the actor host and port,
// roles and kinds. One owner goroutine rebuilds the full de-duplicated alive member set on every
// memberlist join/leave/update event and on a timer, publishes it (Members), emits Events and
// feeds protoactor's MemberList.UpdateClusterTopology. A second goroutine retries joins (seeds
// while alone, departed addresses after a partition) and tells departed-but-alive nodes that
// they were declared dead.
//
// A member id that left is never admitted again (protoactor blocks it forever as well): a
// restarted node must use a new actor system id.
//
// All methods are goroutine-safe.
type Provider struct {
	cfg Config
	tm  timings
	log *zap.Logger

	dirty   chan struct{} // memberlist changed; buffered 1
	notices chan notice   // received declared-dead notices
	stop    chan struct{} // closed by Shutdown
	wg      sync.WaitGroup

	// lifeMu guards started, stopped, ml, cluster and selfMember.
	lifeMu     sync.Mutex
	started    bool
	stopped    bool
	ml         *memberlist.Memberlist
	cluster    *pcluster.Cluster
	selfMember Member

	// mu guards view, sorted, departed and reconnect.
	mu        sync.RWMutex
	view      map[string]Member    // alive members by id, including self
	sorted    []Member             // view sorted by ID
	departed  map[string]struct{}  // ids reported as MemberLeft
	reconnect map[string]time.Time // memberlist address -> retry until

	subs subscribers
	d    *delegate
	gate *tlsGate
	meta nodeMeta // set by StartMember

	// Owned by the owner goroutine (and StartMember before it starts).
	selfDead bool
	missing  map[string]time.Time // view members absent from memberlist, since when
}

// NewProvider returns a Provider for cfg. It does nothing until StartMember.
func NewProvider(cfg Config) (*Provider, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Provider{
		cfg:       cfg,
		tm:        cfg.Profile.timings(),
		log:       cfg.Logger,
		dirty:     make(chan struct{}, 1),
		notices:   make(chan notice, 16),
		stop:      make(chan struct{}),
		view:      map[string]Member{},
		departed:  map[string]struct{}{},
		reconnect: map[string]time.Time{},
		missing:   map[string]time.Time{},
		gate:      newTLSGate(cfg.RemoteTLS, cfg.Profile.timings().reconnect, cfg.Logger),
	}, nil
}

// StartMember creates the memberlist node named c.ActorSystem.ID and starts the owner
// goroutines. It does not block on the network: seeds are joined in the background. The
// actor system's remote must already be started (its host:port goes into the node meta).
func (p *Provider) StartMember(c *pcluster.Cluster) error {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.stopped {
		return ErrShutdown
	}
	if p.started {
		return fmt.Errorf("%w: provider already started", ErrInvalidConfig)
	}
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("cluster: actor system address: %w", err)
	}
	var started int64
	if !p.cfg.Started.IsZero() {
		started = p.cfg.Started.UnixMilli()
	}
	meta, err := encodeMeta(nodeMeta{NodeID: p.cfg.NodeID, Host: host, Port: port,
		Roles: p.cfg.Roles, Kinds: c.GetClusterKinds(), Leaving: true, Session: p.cfg.Session, Started: started})
	if err != nil { // checked with Leaving set so the leave announcement fits too
		return err
	}
	p.meta = nodeMeta{NodeID: p.cfg.NodeID, Host: host, Port: port, Roles: p.cfg.Roles, Kinds: c.GetClusterKinds(),
		Session: p.cfg.Session, Started: started}
	if meta, err = encodeMeta(p.meta); err != nil {
		return err
	}
	p.d = &delegate{p: p, meta: meta}
	mc, err := p.memberlistConfig(c.ActorSystem.ID, meta)
	if err != nil {
		return err
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster: create memberlist: %w", err)
	}
	// memberlist reported the local node through NotifyJoin during Create.
	selfNode, ok := p.d.node(c.ActorSystem.ID)
	if !ok {
		return errors.Join(fmt.Errorf("cluster: local node %s not reported by memberlist", c.ActorSystem.ID), ml.Shutdown())
	}
	self, err := memberFromNode(selfNode)
	if err != nil {
		return errors.Join(err, ml.Shutdown())
	}
	p.ml, p.cluster, p.selfMember, p.started = ml, c, self, true
	p.rebuild()
	p.wg.Add(2)
	go p.run()
	go p.reconnectLoop()
	return nil
}

// StartClient returns ErrClientNotSupported: every dair node is a full member.
func (p *Provider) StartClient(*pcluster.Cluster) error { return ErrClientNotSupported }

// Shutdown leaves the cluster (graceful: broadcast a leave and wait up to the profile's leave
// timeout), shuts memberlist down, stops the owner goroutines and closes every subscription.
// It is idempotent; later calls return nil.
func (p *Provider) Shutdown(graceful bool) error {
	p.lifeMu.Lock()
	if p.stopped {
		p.lifeMu.Unlock()
		return nil
	}
	p.stopped = true
	ml := p.ml
	p.lifeMu.Unlock()

	var errs []error
	if ml != nil {
		if graceful {
			// Announce the leave in the meta first so peers report MemberLeft without the
			// grace period they apply to failures.
			leaving := p.meta
			leaving.Leaving = true
			if meta, err := encodeMeta(leaving); err != nil {
				errs = append(errs, err)
			} else {
				p.d.setMeta(meta)
				if err := ml.UpdateNode(p.tm.leave); err != nil {
					errs = append(errs, fmt.Errorf("cluster: announce leave: %w", err))
				}
			}
			if err := ml.Leave(p.tm.leave); err != nil {
				errs = append(errs, fmt.Errorf("cluster: leave: %w", err))
			}
		}
		if err := ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: shutdown memberlist: %w", err))
		}
	}
	close(p.stop)
	p.wg.Wait()
	p.subs.closeAll()
	return errors.Join(errs...)
}

// Members returns the alive members, including this node, sorted by ID. The caller owns the
// returned slice. It does not block on the network.
func (p *Provider) Members() []Member {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Member, len(p.sorted))
	for i, m := range p.sorted {
		out[i] = m.clone()
	}
	return out
}

// Self returns this node's member entry (zero before StartMember).
func (p *Provider) Self() Member {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	return p.selfMember.clone()
}

// Subscribe returns a channel of membership events after this call and a cancel function.
// Events are queued without bound per subscriber, so a slow reader never blocks membership;
// the channel has capacity buf. Cancel (idempotent) or Shutdown closes the channel.
func (p *Provider) Subscribe(buf int) (<-chan Event, func()) {
	return p.subs.add(buf)
}

// memberlistConfig builds the memberlist config for node name.
func (p *Provider) memberlistConfig(name string, meta []byte) (*memberlist.Config, error) {
	mc := p.cfg.Profile.memberlistConfig()
	mc.Name = name
	host, port, err := splitHostPort(p.cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: BindAddr: %w", ErrInvalidConfig, err)
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if p.cfg.Transport != nil {
		mc.Transport = p.cfg.Transport
		mc.AdvertisePort = 0
	}
	if len(p.cfg.Keyring) > 0 {
		kr, err := memberlist.NewKeyring(p.cfg.Keyring[1:], p.cfg.Keyring[0])
		if err != nil {
			return nil, fmt.Errorf("%w: keyring: %w", ErrInvalidConfig, err)
		}
		mc.Keyring = kr
	}
	stdLog, err := zap.NewStdLogAt(p.log.Named("memberlist"), zap.DebugLevel)
	if err != nil {
		return nil, fmt.Errorf("cluster: memberlist logger: %w", err)
	}
	mc.Logger = stdLog
	mc.LogOutput = nil
	mc.Delegate, mc.Events, mc.Conflict = p.d, p.d, p.d
	return mc, nil
}

// run is the owner goroutine: it rebuilds the member set on changes and on a timer, and
// handles declared-dead notices.
func (p *Provider) run() {
	defer p.wg.Done()
	tick := time.NewTicker(p.tm.refresh)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.dirty:
			p.rebuild()
		case <-tick.C:
			p.rebuild()
		case n := <-p.notices:
			p.handleNotice(n)
		}
	}
}

// markDirty asks the owner goroutine to rebuild. It never blocks.
func (p *Provider) markDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// aliveMembers decodes memberlist's alive nodes into members, skipping departed, blocked and
// (with TLS) unverified ones and resolving actor address conflicts; present lists every name
// memberlist knows. The caller holds p.mu for reading.
func (p *Provider) aliveMembers(prev map[string]Member, selfID string) (cur map[string]Member, present map[string]bool) {
	blocked := p.cluster.Remote.BlockList()
	cur = make(map[string]Member, len(prev))
	byAddr := map[string]string{}
	present = map[string]bool{}
	for _, n := range p.d.snapshot() {
		present[n.Name] = true
		m, err := memberFromNode(n)
		if err != nil {
			p.log.Warn("cluster: skip member", zap.Error(err))
			continue
		}
		if _, gone := p.departed[m.ID]; gone && m.ID != selfID {
			continue
		}
		if m.ID != selfID && (blocked.IsBlocked(m.ID) || !p.gate.admitted(m, p.goProbe)) {
			continue
		}
		if other, dup := byAddr[m.Address]; dup {
			// One actor address can only be held by one live process: prefer the newcomer
			// (the old holder must be gone), else the larger id.
			_, otherKnown := prev[other]
			_, mKnown := prev[m.ID]
			keepOther := other == selfID || (mKnown && !otherKnown) ||
				(mKnown == otherKnown && other > m.ID)
			if keepOther {
				continue
			}
			delete(cur, other)
		}
		byAddr[m.Address] = m.ID
		cur[m.ID] = m
	}
	return cur, present
}

// rebuild recomputes the alive set from memberlist, emits events and feeds protoactor's
// member list. Called only by StartMember (before the goroutines start) and the owner.
func (p *Provider) rebuild() {
	selfID := p.selfMember.ID
	p.mu.RLock()
	prev := p.view
	cur, present := p.aliveMembers(prev, selfID)
	p.mu.RUnlock()
	p.gate.forget(present)

	// A member that vanished from memberlist stays in the view for a grace period: after a
	// partition heals, the isolated node's queued dead broadcasts can briefly mark healthy
	// nodes dead until they refute. Members that left gracefully or were displaced by an
	// address conflict leave at once.
	now := time.Now()
	for id, old := range prev {
		if _, ok := cur[id]; ok || present[id] || id == selfID {
			delete(p.missing, id)
			continue
		}
		if p.d.leftGracefully(id) {
			continue
		}
		since, ok := p.missing[id]
		if !ok {
			p.missing[id], since = now, now
		}
		if now.Sub(since) < p.tm.leaveGrace {
			cur[id] = old
		}
	}

	var events []Event
	p.mu.Lock()
	for id, old := range prev {
		if _, ok := cur[id]; !ok && id != selfID {
			delete(p.missing, id)
			p.departed[id] = struct{}{}
			p.reconnect[old.MemberlistAddr] = now.Add(p.tm.reconnTTL)
			events = append(events, Event{Kind: MemberLeft, Member: old})
		}
	}
	for id, m := range cur {
		old, ok := prev[id]
		switch {
		case id == selfID:
		case !ok:
			events = append(events, Event{Kind: MemberJoined, Member: m})
		case !old.equal(m):
			events = append(events, Event{Kind: MemberUpdated, Member: m})
		}
	}
	p.view = cur
	p.sorted = make([]Member, 0, len(cur))
	for _, m := range cur {
		p.sorted = append(p.sorted, m)
	}
	slices.SortFunc(p.sorted, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	topo := make(pcluster.Members, 0, len(p.sorted))
	for _, m := range p.sorted {
		topo = append(topo, m.protoMember())
	}
	p.mu.Unlock()

	p.cluster.MemberList.UpdateClusterTopology(topo)
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.Member.ID, b.Member.ID) })
	for _, ev := range events {
		p.log.Info("cluster: membership event", zap.Stringer("kind", ev.Kind),
			zap.String("member", ev.Member.ID), zap.String("node", ev.Member.NodeID))
		p.subs.publish(ev)
	}
}

// reconnectLoop retries joins towards seeds (while alone) and departed addresses, and tells
// departed-but-alive nodes that they were declared dead. memberlist never rejoins on its own:
// after a partition heals, both sides consider each other dead and stop talking.
func (p *Provider) reconnectLoop() {
	defer p.wg.Done()
	tick := time.NewTicker(p.tm.reconnect)
	defer tick.Stop()
	for {
		p.reconnectOnce()
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
	}
}

func (p *Provider) reconnectOnce() {
	now := time.Now()
	p.mu.Lock()
	alone := len(p.view) <= 1
	var targets []string
	for addr, until := range p.reconnect {
		if now.After(until) {
			delete(p.reconnect, addr)
			continue
		}
		targets = append(targets, addr)
	}
	departed := make(map[string]struct{}, len(p.departed))
	for id := range p.departed {
		departed[id] = struct{}{}
	}
	side, minID := len(p.view), ""
	for _, m := range p.sorted {
		if minID == "" || m.ID < minID {
			minID = m.ID
		}
	}
	p.mu.Unlock()
	if alone {
		targets = append(targets, p.cfg.Join...)
	}

	aliveAddr := map[string]bool{}
	var zombies []*memberlist.Node
	for _, n := range p.d.snapshot() {
		aliveAddr[n.Address()] = true
		if _, gone := departed[n.Name]; gone {
			zombies = append(zombies, n)
		}
	}
	targets = slices.DeleteFunc(targets, func(a string) bool { return aliveAddr[a] })
	self := p.selfMember.MemberlistAddr
	targets = slices.DeleteFunc(targets, func(a string) bool { return a == self })
	if len(targets) > 0 {
		slices.Sort(targets)
		targets = slices.Compact(targets)
		if n, err := p.ml.Join(targets); err != nil {
			p.log.Debug("cluster: join", zap.Strings("targets", targets), zap.Int("joined", n), zap.Error(err))
		}
	}
	if len(zombies) == 0 {
		return
	}
	for _, n := range zombies {
		msg, err := encodeNotice(notice{From: p.selfMember.ID, Side: side, MinID: minID, To: n.Name})
		if err != nil {
			p.log.Error("cluster: encode notice", zap.Error(err))
			return
		}
		if err := p.ml.SendReliable(n, msg); err != nil {
			p.log.Debug("cluster: send declared-dead notice", zap.String("to", n.Name), zap.Error(err))
		}
	}
}

// handleNotice decides whether a declared-dead notice means this node lost. Called only by the
// owner goroutine.
func (p *Provider) handleNotice(n notice) {
	if p.selfDead {
		return
	}
	if n.To != "" && n.To != p.selfMember.ID {
		// Meant for an earlier incarnation of this process at the same address.
		p.log.Debug("cluster: ignore declared-dead notice for another incarnation", zap.String("to", n.To), zap.String("by", n.From))
		return
	}
	p.mu.RLock()
	_, mutual := p.departed[n.From]
	side, minID := len(p.view), ""
	for _, m := range p.sorted {
		if minID == "" || m.ID < minID {
			minID = m.ID
		}
	}
	p.mu.RUnlock()
	if !loses(mutual, side, minID, n) {
		return
	}
	p.selfDead = true
	p.log.Warn("cluster: this node was declared dead by the cluster",
		zap.String("by", n.From), zap.Int("our_side", side), zap.Int("their_side", n.Side))
	p.subs.publish(Event{Kind: SelfDeclaredDead, Member: p.selfMember.clone()})
}

// loses reports whether the receiver of notice n is the node that must consider itself dead.
// If the sender is still in our view (we never saw it leave), the sender's side declared us
// dead unilaterally: we lose. If both sides saw each other leave (a healed partition), the
// side with fewer members loses; on a tie, the side whose smallest member id is larger loses.
func loses(mutual bool, side int, minID string, n notice) bool {
	if !mutual {
		return true
	}
	if side != n.Side {
		return side < n.Side
	}
	return minID > n.MinID
}
