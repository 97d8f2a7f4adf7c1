package actors

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/controlplane"
)

// liveness is this node's own heartbeat against the store (its liveness lease, renewed every
// LivenessInterval for LivenessTTL) and what the checker of its peers needs to know of it.
type liveness struct {
	mu           sync.Mutex // guards healthySince and renewedAt
	healthySince time.Time
	renewedAt    time.Time
}

// livenessRules returns the liveness timings of the node's config.
func livenessRules(cfg Config) controlplane.LivenessRules {
	return controlplane.LivenessRules{TTL: cfg.LivenessTTL, Interval: cfg.LivenessInterval}
}

// renewLiveness renews the node's liveness lease once and records the outcome.
func (n *Node) renewLiveness(ctx context.Context) {
	e := n.env
	rules := livenessRules(e.cfg)
	rctx, cancel := context.WithTimeout(ctx, rules.Interval)
	start := time.Now()
	ok, err := n.plane.recoverer.RenewLiveness(rctx, rules.TTL)
	cancel()
	now := time.Now()
	switch took := now.Sub(start); {
	case err != nil:
		e.log.Debug("renew liveness lease", zap.Duration("took", took), zap.Error(err))
	case took > rules.Interval/2:
		e.log.Debug("liveness lease renewal slow", zap.Duration("took", took))
	}
	l := &n.live
	l.mu.Lock()
	l.healthySince = controlplane.NextHealthySince(l.healthySince, l.renewedAt, now, ok && err == nil, rules)
	if ok && err == nil {
		l.renewedAt = now
	}
	l.mu.Unlock()
}

// self returns what the checker knows of this node's own renewals.
func (l *liveness) self() (healthySince, renewedAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healthySince, l.renewedAt
}

// startLiveness takes the liveness lease before the node advertises anything, then renews it
// from a goroutine of the node's group (nothing to do without a cluster).
func (n *Node) startLiveness(ctx context.Context) {
	if n.env.cfg.Cluster == nil {
		return
	}
	n.renewLiveness(ctx)
	g := n.env.group
	g.Tick(n.env.cfg.LivenessInterval, func() {
		if !n.env.dead.Load() {
			n.renewLiveness(g.Context())
		}
	})
}

// watchLiveness checks every LivenessInterval, independently of gossip timing, whether each
// peer of the membership is still there: a connection to its actor endpoint that is refused
// means its process is gone; a liveness lease it has not renewed for LivenessTTL (while this
// node's own renewals went through) means it is paused, cut off from the store, or gone
// (controlplane.JudgeMember). A peer whose lease is due to lapse before the next check is
// checked again as it lapses (controlplane.NextLivenessCheck). Lost peers are reported on the
// channel, each once; the checks run on the node's group and stop when ctx ends.
func (n *Node) watchLiveness(ctx context.Context) <-chan cluster.Member {
	e := n.env
	out := make(chan cluster.Member, 16)
	e.group.Go(func(context.Context) {
		known := map[string]controlplane.MemberLiveness{}
		reported := map[string]bool{} // lost members already reported
		timer := time.NewTimer(e.cfg.LivenessInterval)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			next := time.Now().Add(e.cfg.LivenessInterval)
			if !e.dead.Load() {
				var lost []cluster.Member
				lost, next = n.checkPeers(ctx, known, reported)
				for _, m := range lost {
					select {
					case out <- m:
					case <-ctx.Done():
						return
					}
				}
			}
			timer.Reset(time.Until(next))
		}
	})
	return out
}

// checkPeers observes every peer not yet reported once (in parallel), judges it, and returns
// the newly lost ones, which it adds to reported, and when to check next. known is updated:
// members that left the membership are forgotten.
func (n *Node) checkPeers(ctx context.Context, known map[string]controlplane.MemberLiveness, reported map[string]bool) ([]cluster.Member, time.Time) {
	e := n.env
	rules := livenessRules(e.cfg)
	var peers []cluster.Member
	for _, m := range e.cfg.Cluster.Members() {
		if m.ID != e.incarnation && !reported[m.ID] {
			peers = append(peers, m)
		}
	}
	obs := make([]controlplane.LivenessObservation, len(peers))
	var wg sync.WaitGroup
	for i, m := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, rules.Interval)
			free, until, err := n.plane.recoverer.ReadLiveness(cctx, m.ID)
			cancel()
			obs[i].LeaseFree, obs[i].LeaseUntil = free && err == nil, until
			obs[i].Refused = endpointRefuses(m.Address)
		}()
	}
	wg.Wait()
	since, renewed := n.live.self()
	now := time.Now()
	next := make(map[string]controlplane.MemberLiveness, len(peers))
	untils := make([]time.Time, 0, len(peers))
	var lost []cluster.Member
	for i, m := range peers {
		o := obs[i]
		o.Now, o.HealthySince, o.RenewedAt = now, since, renewed
		verdict, keep := controlplane.JudgeMember(known[m.ID], o, rules)
		next[m.ID] = keep
		untils = append(untils, o.LeaseUntil)
		if verdict.Lost() {
			reported[m.ID] = true
			e.log.Warn("cluster member lost: liveness check", zap.String("member", m.ID), zap.String("node", m.NodeID),
				zap.Stringer("verdict", verdict))
			lost = append(lost, m)
		}
	}
	clear(known)
	for id, k := range next {
		known[id] = k
	}
	return lost, controlplane.NextLivenessCheck(now, untils, rules)
}
