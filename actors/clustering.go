package actors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
)

// ActorProviderName is the provider that reaches runtime instances on any node of the cluster
// through their protoactor PIDs (address + actor id from the capacity descriptor).
const ActorProviderName = "actor"

// hostPIDID is the PID id of a node's runtime host actor.
func hostPIDID(nodeID string) string { return "node-" + nodeID + "/host" }

// RemotePID resolves an instance's PID from its descriptor (its remote address and actor id);
// providers that reach instances on other processes use it as their resolver.
func RemotePID(d *messages.CapacityDescriptor) (*actor.PID, bool) {
	if d.GetAddress() == "" || d.GetActorId() == "" {
		return nil, false
	}
	return actor.NewPID(d.Address, d.ActorId), true
}

// InstanceIDInUse returns the scale-out providers' local.Config.InUse over st: an instance id
// absent from the registry is still in use while executions are indexed under it (not yet
// recovered) or reservations are held against it. Reusing it then would let a recovery of the
// departed instance fence, and requeue, the runs of the new one.
func InstanceIDInUse(st store.Store) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		// Reservations first: one cheap count, and a departed instance's holds outlive its
		// executions' recovery (they are released one run at a time).
		if n, err := st.ReservationCount(ctx, id); err != nil || n > 0 {
			return n > 0, err
		}
		execs, err := st.ListExecutionsByInstance(ctx, id)
		return len(execs) > 0, err
	}
}

// newActorProvider returns the cluster's "actor" provider: the local provider's behaviour with
// a remote resolver and a host that places new instances on the least-loaded runtime member.
func newActorProvider(e *env, m *cluster.Membership) *local.Provider {
	return local.New(local.Config{Name: ActorProviderName, System: e.system, Resolver: RemotePID,
		Host: &clusterHost{env: e, members: m}, Instances: e.st.ListInstances, InUse: InstanceIDInUse(e.st), ReadyTimeout: 15 * time.Second})
}

// clusterHost creates runtime instances on a runtime member of the cluster.
type clusterHost struct {
	env     *env
	members *cluster.Membership
}

// CreateInstance picks the runtime member hosting the fewest live instances (ties by id) and
// asks its runtime host to start the instance. A store lease on the instance id keeps two
// control planes from creating the same id on two nodes.
func (h *clusterHost) CreateInstance(ctx context.Context, id string, settings *messages.TenantSettings, requestID string) error {
	e := h.env
	holder := requestID
	if holder == "" {
		holder = e.incarnation
	}
	lease := "create-instance/" + id
	ok, err := e.st.AcquireLease(ctx, lease, holder, time.Minute)
	if err != nil {
		return fmt.Errorf("lease instance id %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("instance id %s is being created by another control plane", id)
	}
	// The lease covers the window until the instance is in the registry (from then on every
	// control plane sees the id as taken); it is released then, or on failure.
	defer func() {
		if err := e.st.ReleaseLease(context.Background(), lease, holder); err != nil {
			e.log.Warn("release instance id lease", zap.String("lease", lease), zap.Error(err))
		}
	}()
	// Another control plane may have created and registered the id between our registry read
	// and our lease: under the lease, the registry is the truth.
	if _, err := e.st.GetInstance(ctx, id); err == nil {
		return fmt.Errorf("instance id %s already exists", id)
	}
	insts, err := e.st.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("list instances: %w", err)
	}
	load := map[string]int{}
	for _, d := range insts {
		load[d.NodeId]++
	}
	var cands []cluster.Member
	for _, m := range h.members.Members() {
		if m.HasRole(RoleRuntime) {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return fmt.Errorf("no runtime member in the cluster")
	}
	sort.Slice(cands, func(i, j int) bool {
		if load[cands[i].ID] != load[cands[j].ID] {
			return load[cands[i].ID] < load[cands[j].ID]
		}
		return cands[i].ID < cands[j].ID
	})
	// A crashed member stays in memberlist's view until its failure detector fires: skip the
	// members whose remote endpoint refuses connections instead of waiting out a timeout.
	target := cands[0]
	for _, m := range cands {
		if !endpointRefuses(m.Address) {
			target = m
			break
		}
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	pid := actor.NewPID(target.Address, hostPIDID(target.NodeID))
	res, err := e.system.Root.RequestFuture(pid, &messages.CreateInstanceRequest{RuntimeInstanceId: id, Settings: settings,
		ScaleOutRequestId: requestID}, timeout).Result()
	if err != nil {
		return fmt.Errorf("create instance %s on %s: %w", id, target.NodeID, err)
	}
	if r, ok := res.(*messages.ProviderResult); !ok || !r.Ok {
		return fmt.Errorf("create instance %s on %s: %v", id, target.NodeID, res)
	}
	e.log.Info("instance placed", zap.String("runtime_instance_id", id), zap.String("node", target.NodeID), zap.String("member", target.ID))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err := e.st.GetInstance(ctx, id); err == nil {
			return nil
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// tombstone names the lease that marks a member incarnation as declared dead. Its holder is
// the coordinator that declared it; a node that finds its own tombstone stops serving.
func tombstone(incarnation string) string { return store.TombstoneLease(incarnation) }

// declareDead fences everything a lost member ran: its tombstone is written (so the member,
// if it is only paused, stops when it resumes), its registry entries are removed (no new work),
// and the next recovery round requeues its runs with bumped epochs.
func (c *core) declareDead(ctx context.Context, member string) error {
	e := c.env
	if _, err := e.st.AcquireLease(ctx, tombstone(member), store.TombstoneHolderPrefix+e.incarnation, 24*time.Hour); err != nil {
		return fmt.Errorf("tombstone %s: %w", member, err)
	}
	insts, err := e.st.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("list instances: %w", err)
	}
	for _, d := range insts {
		if d.NodeId == member {
			if err := e.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
				return fmt.Errorf("drop instance %s: %w", d.RuntimeInstanceId, err)
			}
			e.log.Warn("instance of a lost member marked unsafe", zap.String("runtime_instance_id", d.RuntimeInstanceId), zap.String("member", member))
		}
	}
	return nil
}

// memberOverlay returns insts with every instance published by an actor system that is not
// one of members marked unhealthy (a copy; insts is not modified). Such a descriptor is the
// last word of a member the cluster lost, possibly re-published by it before it learned it was
// declared dead: it must neither receive runs nor count as the tenant's capacity.
func memberOverlay(insts []*messages.CapacityDescriptor, members []cluster.Member) []*messages.CapacityDescriptor {
	live := make(map[string]bool, len(members))
	for _, mb := range members {
		live[mb.ID] = true
	}
	return markUnhealthy(insts, func(d *messages.CapacityDescriptor) bool { return d.NodeId != "" && !live[d.NodeId] })
}

// amIDead reports whether another node has declared this incarnation dead. It takes the
// tombstone lease for a millisecond when free, which leaves nothing behind.
func (e *env) amIDead(ctx context.Context) (bool, error) {
	ok, err := e.st.AcquireLease(ctx, tombstone(e.incarnation), e.incarnation, time.Millisecond)
	if err != nil {
		return false, err
	}
	return !ok, nil
}

// result names for instance answers.
func (in *instance) providerName() string {
	if in.env.cfg.Cluster != nil {
		return ActorProviderName
	}
	return local.Name
}

var _ providers.ScaleOuter = (*local.Provider)(nil)

// watch follows cluster membership (member lost → declare it dead and recover at once; self
// declared dead → stop serving) and checks this node's tombstone every heartbeat.
func (n *Node) watch() {
	defer close(n.watchDone)
	e := n.env
	var events <-chan cluster.Event
	if e.cfg.Cluster != nil {
		ch, cancel := e.cfg.Cluster.Subscribe(256)
		defer cancel()
		events = ch
	}
	var crashed <-chan cluster.Member
	if e.cfg.Cluster != nil {
		ch, cancel := n.watchCrashes()
		defer cancel()
		crashed = ch
	}
	lost := map[string]bool{} // members already declared dead by this loop
	tk := time.NewTicker(e.cfg.HeartbeatInterval)
	defer tk.Stop()
	for {
		select {
		case <-n.watchStop:
			return
		case m := <-crashed:
			if !lost[m.ID] {
				lost[m.ID] = true
				e.log.Warn("cluster member crashed: its remote endpoint refuses connections", zap.String("member", m.ID), zap.String("node", m.NodeID))
				n.memberLost(m)
			}
		case ev := <-events:
			switch ev.Kind {
			case cluster.MemberLeft:
				if ev.Member.ID == e.incarnation || lost[ev.Member.ID] {
					continue
				}
				lost[ev.Member.ID] = true
				n.memberLost(ev.Member)
			case cluster.SelfDeclaredDead:
				n.declaredDead("membership")
			}
		case <-tk.C:
			if e.cfg.Cluster == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), e.cfg.HeartbeatInterval)
			dead, err := e.amIDead(ctx)
			cancel()
			if err == nil && dead {
				n.declaredDead("tombstone")
			}
		}
	}
}

// crashProbeTimeout bounds the connection attempt that tells a crashed member from a slow one.
const crashProbeTimeout = 250 * time.Millisecond

// watchCrashes reports members whose process is gone, well before memberlist's failure
// detector would (about 1.2 s on the local profile, 5 s on LAN defaults): when protoactor loses
// its connection to a member's remote endpoint, one connection attempt to that endpoint tells
// a crashed process (the kernel refuses: nothing listens on the port any more) from a paused or
// partitioned one (the attempt times out or succeeds), which is left to memberlist. A refused
// connection is final for that incarnation: a restarted process has a new member id.
func (n *Node) watchCrashes() (<-chan cluster.Member, func()) {
	e := n.env
	out := make(chan cluster.Member, 16)
	sub := e.system.EventStream.Subscribe(func(evt any) {
		ev, ok := evt.(*remote.EndpointTerminatedEvent)
		if !ok {
			return
		}
		var m cluster.Member
		for _, c := range e.cfg.Cluster.Members() {
			if c.Address == ev.Address && c.ID != e.incarnation {
				m = c
			}
		}
		if m.ID == "" {
			return
		}
		go func() {
			if !endpointRefuses(ev.Address) {
				return
			}
			select {
			case out <- m:
			case <-n.watchStop:
			}
		}()
	})
	return out, func() { e.system.EventStream.Unsubscribe(sub) }
}

// endpointRefuses reports whether a TCP connection to addr is refused: no process listens
// there any more. A timeout or a success (a paused, partitioned or live process) is false.
func endpointRefuses(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, crashProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// memberLost declares a lost member dead and runs a recovery round (taking over the recovery
// lease if the lost member held it).
func (n *Node) memberLost(m cluster.Member) {
	e := n.env
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.log.Warn("cluster member lost", zap.String("member", m.ID), zap.String("node", m.NodeID))
	if err := n.core.declareDead(ctx, m.ID); err != nil {
		e.log.Warn("declare member dead", zap.String("member", m.ID), zap.Error(err))
		return
	}
	if err := e.st.ReleaseLease(ctx, "recovery", m.ID); err != nil {
		e.log.Warn("release lost member's recovery lease", zap.Error(err))
	}
	// Its pump's queue claims come back now rather than after their visibility timeout (30 s
	// by default). A node restarted under the same node id releases them itself on start.
	if m.NodeID != "" && m.NodeID != e.nodeID {
		if k, err := e.st.ReleaseClaimsOf(ctx, pumpIDOf(m.NodeID)); err != nil {
			e.log.Warn("release lost member's queue claims", zap.Error(err))
		} else if k > 0 {
			e.log.Info("released lost member's queue claims", zap.String("member", m.ID), zap.Int("items", k))
			if n.core.wakePump != nil {
				n.core.wakePump()
			}
		}
	}
	if n.core.env.cfg.has(RoleControlPlane) {
		if err := n.core.recoverRound(ctx, false); err != nil {
			e.log.Warn("recovery after member loss", zap.Error(err))
		}
	}
}

// declaredDead stops every runtime instance of this node (their executions stop; the runs
// were moved elsewhere under newer epochs) and tells the owner of the process.
func (n *Node) declaredDead(how string) {
	n.deadOnce.Do(func() {
		e := n.env
		e.dead.Store(true)
		e.log.Error("this node was declared dead by the cluster; stopping its runtime instances", zap.String("signal", how))
		for _, id := range e.dir.ids() {
			if pid, ok := e.dir.Lookup(id); ok {
				e.system.Root.Send(pid, &messages.ControlRequest{RuntimeInstanceId: id, Op: "stop_instance"})
			}
		}
		if e.cfg.OnDeclaredDead != nil {
			go e.cfg.OnDeclaredDead()
		}
	})
}

func (in *instance) transportName() string {
	if in.env.cfg.Cluster != nil {
		return "grpc"
	}
	return "in-memory"
}
