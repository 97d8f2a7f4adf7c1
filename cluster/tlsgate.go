package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// probeTLSTimeout bounds one TLS probe of a member's actor endpoint.
const probeTLSTimeout = time.Second

// tlsGate keeps members out of the view until their actor endpoint has presented a
// certificate of our CAs, when the remote uses TLS: a node with a foreign CA may reach
// memberlist (gossip has its own key) but never becomes a member, so no actor message is
// routed to it. Each new member id is probed once with a TLS handshake; a failed probe is
// retried after the profile's reconnect interval. It is goroutine-safe.
type tlsGate struct {
	cfg   *tls.Config // nil: every member is admitted
	retry time.Duration
	log   *zap.Logger

	mu    sync.Mutex // guards state
	state map[string]*gateState
}

type gateState struct {
	ok, probing bool
	failedAt    time.Time
	failures    int
}

func newTLSGate(cfg *tls.Config, retry time.Duration, log *zap.Logger) *tlsGate {
	return &tlsGate{cfg: cfg, retry: retry, log: log, state: map[string]*gateState{}}
}

// admitted reports whether m passed its probe. Otherwise, unless a probe of m runs or failed
// less than retry ago, it starts one with start (which runs the probe in a tracked goroutine).
func (g *tlsGate) admitted(m Member, start func(func())) bool {
	if g.cfg == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state[m.ID]
	if st == nil {
		st = &gateState{}
		g.state[m.ID] = st
	}
	if st.ok || st.probing || (!st.failedAt.IsZero() && time.Since(st.failedAt) < g.retry) {
		return st.ok
	}
	st.probing = true
	start(func() { g.probe(m) })
	return false
}

// probe handshakes with m's actor endpoint and records the result.
func (g *tlsGate) probe(m Member) {
	cfg := g.cfg.Clone()
	cfg.ServerName = m.Host
	ctx, cancel := context.WithTimeout(context.Background(), probeTLSTimeout)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", m.Address)
	if err == nil {
		err = conn.Close()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state[m.ID]
	if st == nil {
		return // forgotten meanwhile
	}
	st.probing = false
	if err == nil {
		st.ok = true
		return
	}
	st.failedAt = time.Now()
	st.failures++
	level := zap.DebugLevel
	if st.failures == 1 {
		level = zap.WarnLevel
	}
	g.log.Log(level, "cluster: member refused: its actor endpoint failed TLS verification", zap.String("member", m.ID),
		zap.String("node", m.NodeID), zap.String("address", m.Address), zap.Error(err))
}

// forget drops the state of members that memberlist no longer lists.
func (g *tlsGate) forget(present map[string]bool) {
	if g.cfg == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, st := range g.state {
		if !present[id] && !st.probing {
			delete(g.state, id)
		}
	}
}

// goProbe runs a TLS probe in a goroutine that Shutdown waits for, then asks for a rebuild.
func (p *Provider) goProbe(probe func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		probe()
		p.markDirty()
	}()
}
