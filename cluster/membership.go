package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// clusterName is protoactor's cluster name for every dair node.
const clusterName = "dair"

// Membership is one node's view of the cluster: protoactor remote, protoactor's cluster
// object fed by a memberlist Provider, and membership events for the engine. All methods are
// goroutine-safe.
type Membership struct {
	system     *actor.ActorSystem
	stopRemote func(graceful bool)
	cluster    *pcluster.Cluster
	provider   *Provider

	once sync.Once
	err  error // result of the first Shutdown
}

// Start starts protoactor remote on system (cfg.ActorHost:cfg.ActorPort, TLS if
// cfg.RemoteTLS is set), then protoactor's cluster object (no kinds, disthash identity lookup)
// fed by a memberlist Provider, and returns the node's Membership. It does not wait for seeds:
// the node joins cfg.Join in the background and retries while alone. ctx only bounds Start.
//
// protoactor's Cluster.StartMember is not used: at this version it creates and starts its own
// remote (so the remote cannot be configured and started first), panics on errors, sleeps 1 s,
// and its Shutdown stops the whole actor system and sleeps 2 s. Start wires the same pieces
// (remote, identity lookup, provider) explicitly; protoactor's gossip and pub/sub are not
// started because dair does not use grains or cluster pub/sub.
//
// On error everything started is stopped. The caller keeps ownership of system and shuts it
// down after Membership.Shutdown.
func Start(ctx context.Context, system *actor.ActorSystem, cfg Config) (*Membership, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cluster: start: %w", err)
	}
	cfg = cfg.withDefaults()
	prov, err := NewProvider(cfg)
	if err != nil {
		return nil, err
	}
	serverOpts := guardOptions(cfg.Logger.Named("remote"))
	var opts []remote.ConfigOption
	if cfg.RemoteTLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(cfg.RemoteTLS.Clone())))
		opts = append(opts, remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg.RemoteTLS.Clone()))))
	}
	opts = append(opts, remote.WithServerOptions(serverOpts...),
		// protoactor's writer puts up to this many messages in one gRPC message (its default,
		// 1,000, of agent send requests of up to a MiB each is far past any receive limit)...
		remote.WithEndpointWriterBatchSize(remoteWriterBatch),
		// ... and starts each peer's queue with room for this many (its default, a million
		// slots, is 16 MB allocated and cleared at every connection; the queue grows as needed).
		remote.WithEndpointWriterQueueSize(remoteWriterQueue))
	rcfg := remote.Configure(cfg.ActorHost, cfg.ActorPort, opts...)
	r := remote.NewRemote(system, rcfg)
	if cfg.noServe {
		system.ProcessRegistry.Address = net.JoinHostPort(cfg.ActorHost, strconv.Itoa(cfg.ActorPort))
	} else if err := startRemote(r); err != nil {
		return nil, err
	}
	stopRemote := func(graceful bool) {
		if !cfg.noServe {
			stopRemoteBounded(r, graceful, remoteStopWait)
		}
	}
	ccfg := pcluster.Configure(clusterName, prov, disthash.New(), rcfg)
	c := pcluster.New(system, ccfg)
	c.Remote = r
	c.IdentityLookup = ccfg.IdentityLookup
	c.IdentityLookup.Setup(c, c.GetClusterKinds(), false)
	if err := ctx.Err(); err != nil {
		c.IdentityLookup.Shutdown()
		stopRemote(false)
		return nil, fmt.Errorf("cluster: start: %w", err)
	}
	if err := prov.StartMember(c); err != nil {
		c.IdentityLookup.Shutdown()
		stopRemote(false)
		return nil, fmt.Errorf("cluster: start member: %w", err)
	}
	return &Membership{system: system, stopRemote: stopRemote, cluster: c, provider: prov}, nil
}

// Limits of the actor port's gRPC streams. gRPC refuses a received message over 4 MiB by
// default, and protoactor's endpoint reader then ends the stream: every message of that batch
// is lost and the peer reconnects (40 concurrent agent sends of 400 KB each timed out that way).
// A node takes messages of up to maxRemoteMessage from its (trusted, TLS-authenticated) peers;
// the agent runtime bounds its own batches far below (agents.Config.MaxBatchBytes).
const (
	maxRemoteMessage  = 1 << 30
	remoteWriterBatch = 64
	remoteWriterQueue = 4096
)

// remoteStopWait bounds protoactor's graceful remote stop. At the pinned version it first stops
// the endpoint writers, one of which may be blocked in its connect retries to a member that
// just died (5 attempts 2 s apart, inside the actor), then waits up to 10 s for the gRPC
// streams of the peers; a process host whose control plane was killed spent ~20 s there.
const remoteStopWait = 2 * time.Second

// stopRemoteBounded stops r; a graceful stop that takes longer than wait is cut short by a
// hard stop of the gRPC server (the graceful part still running ends in the background once
// the blocked endpoint writer gives up).
func stopRemoteBounded(r *remote.Remote, graceful bool, wait time.Duration) {
	if !graceful {
		r.Shutdown(false)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Shutdown(true)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.Shutdown(false) // grpc.Server.Stop: the graceful GracefulStop, if started, returns too
	}
}

// startRemote starts r, turning its listen panic into ErrRemoteStart.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %v", ErrRemoteStart, rec)
		}
	}()
	r.Start()
	return nil
}

// Members returns the alive members, including this node, sorted by ID. The caller owns the
// returned slice. It never blocks on the network.
func (m *Membership) Members() []Member { return m.provider.Members() }

// Self returns this node's member entry.
func (m *Membership) Self() Member { return m.provider.Self() }

// Duplicate returns a live member of another process that uses this node's NodeID and came
// first (see Member.YieldsTo): this node must not serve under that id. It reads the current
// member set and never blocks.
func (m *Membership) Duplicate() (Member, bool) {
	self := m.Self()
	for _, o := range m.Members() {
		if self.YieldsTo(o) {
			return o, true
		}
	}
	return Member{}, false
}

// Subscribe returns a channel of membership events that happen after the call, with capacity
// buf, and a cancel function (idempotent) that closes it. Events are queued per subscriber
// without bound, so a slow reader never delays membership or loses MemberLeft. Shutdown closes
// every subscription.
func (m *Membership) Subscribe(buf int) (<-chan Event, func()) { return m.provider.Subscribe(buf) }

// SetAgentTypes advertises types as this node's agent types (Member.AgentTypes on every member),
// replacing the previous list, and broadcasts the change. It blocks until the broadcast went out
// or the profile's leave timeout passed (the change still spreads by gossip then). It returns
// ErrMetaTooLarge, leaving the advertisement unchanged, when the node meta would exceed
// memberlist's 512-byte limit, and ErrShutdown before start or after Shutdown.
func (m *Membership) SetAgentTypes(types []string) error { return m.provider.setAgentTypes(types) }

// setAgentTypes replaces the agent types of the node meta and broadcasts it (Membership.SetAgentTypes).
func (p *Provider) setAgentTypes(types []string) error {
	p.lifeMu.Lock()
	if p.stopped || !p.started {
		p.lifeMu.Unlock()
		return ErrShutdown
	}
	next := p.meta
	next.AgentTypes = slices.Clone(types)
	leaving := next
	leaving.Leaving = true
	if _, err := encodeMeta(leaving); err != nil { // the leave announcement must fit too
		p.lifeMu.Unlock()
		return err
	}
	meta, err := encodeMeta(next)
	if err != nil {
		p.lifeMu.Unlock()
		return err
	}
	// Shutdown reads p.meta after marking the provider stopped under lifeMu, so this write
	// either happens before that or not at all.
	p.meta = next
	p.d.setMeta(meta)
	ml := p.ml
	p.lifeMu.Unlock()
	if err := ml.UpdateNode(p.tm.leave); err != nil {
		return fmt.Errorf("cluster: broadcast agent types: %w", err)
	}
	return nil
}

// Cluster returns protoactor's cluster object (topology via Cluster().MemberList). Grains are
// not supported: no kinds are registered.
func (m *Membership) Cluster() *pcluster.Cluster { return m.cluster }

// Shutdown leaves memberlist (graceful: broadcast a leave first, so peers see MemberLeft at
// once; otherwise peers detect the failure), stops the identity lookup and the remote server
// (graceful: drain, up to 10 s inside protoactor). It is idempotent and returns the first
// call's error. The actor system itself is left running; the caller shuts it down.
func (m *Membership) Shutdown(graceful bool) error {
	m.once.Do(func() {
		err := m.provider.Shutdown(graceful)
		m.cluster.IdentityLookup.Shutdown()
		m.stopRemote(graceful)
		if err != nil {
			m.err = fmt.Errorf("cluster: shutdown: %w", err)
		}
	})
	return m.err
}
