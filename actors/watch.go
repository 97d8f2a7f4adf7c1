package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/messages"
)

// memberLostTimeout bounds the recovery work after a member loss.
const memberLostTimeout = 30 * time.Second

// startWatch follows the cluster membership from a goroutine of the node's group (nothing to
// follow without a cluster). Stop ends it first.
func (n *Node) startWatch() {
	if n.env.cfg.Cluster == nil {
		return
	}
	ctx, cancel := context.WithCancel(n.env.group.Context())
	n.stopWatch = cancel
	n.env.group.Go(func(context.Context) {
		defer cancel()
		n.watch(ctx)
	})
}

// watch follows cluster membership (member lost → declare it dead and recover at once; self
// declared dead → stop serving) and checks this node's tombstone every heartbeat, until ctx
// ends.
func (n *Node) watch(ctx context.Context) {
	e := n.env
	events, unsubscribe := e.cfg.Cluster.Subscribe(256)
	defer unsubscribe()
	crashed, unwatch := n.watchCrashes(ctx)
	defer unwatch()
	lost := map[string]bool{} // members already declared dead by this loop
	tk := time.NewTicker(e.cfg.HeartbeatInterval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-crashed:
			if !lost[m.ID] {
				lost[m.ID] = true
				e.log.Warn("cluster member crashed: its remote endpoint refuses connections", zap.String("member", m.ID), zap.String("node", m.NodeID))
				n.memberLost(ctx, m)
			}
		case ev := <-events:
			switch ev.Kind {
			case cluster.MemberLeft:
				if ev.Member.ID == e.incarnation || lost[ev.Member.ID] {
					continue
				}
				lost[ev.Member.ID] = true
				n.memberLost(ctx, ev.Member)
			case cluster.SelfDeclaredDead:
				n.declaredDead("membership")
			}
		case <-tk.C:
			tctx, cancel := context.WithTimeout(ctx, e.cfg.HeartbeatInterval)
			dead, err := n.plane.recoverer.IsDeclaredDead(tctx)
			cancel()
			if err == nil && dead {
				n.declaredDead("tombstone")
			}
		}
	}
}

// watchCrashes reports members whose process is gone, well before memberlist's failure
// detector would (about 1.2 s on the local profile, 5 s on LAN defaults): when protoactor loses
// its connection to a member's remote endpoint, one connection attempt to that endpoint tells
// a crashed process (the kernel refuses: nothing listens on the port any more) from a paused or
// partitioned one (the attempt times out or succeeds), which is left to memberlist. A refused
// connection is final for that incarnation: a restarted process has a new member id. The
// probes run on the node's group and stop reporting when ctx ends.
func (n *Node) watchCrashes(ctx context.Context) (<-chan cluster.Member, func()) {
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
		e.group.Go(func(context.Context) {
			if !endpointRefuses(ev.Address) {
				return
			}
			select {
			case out <- m:
			case <-ctx.Done():
			}
		})
	})
	return out, func() { e.system.EventStream.Unsubscribe(sub) }
}

// memberLost declares a lost member dead and, on a control-plane node, runs a recovery round
// (taking over the recovery lease if the lost member held it).
func (n *Node) memberLost(ctx context.Context, m cluster.Member) {
	ctx, cancel := context.WithTimeout(ctx, memberLostTimeout)
	defer cancel()
	n.plane.recoverer.MemberLost(ctx, m.ID, m.NodeID, n.env.cfg.has(RoleControlPlane))
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
				e.system.Root.Send(pid, &messages.ControlRequest{RuntimeInstanceId: id, Op: messages.OpStopInstance.String()})
			}
		}
		if e.cfg.OnDeclaredDead != nil {
			// Not on the node's group: the owner's callback may stop the node, and Stop waits
			// for the group.
			go e.cfg.OnDeclaredDead()
		}
	})
}
