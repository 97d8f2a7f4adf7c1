package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/logging"
	"github.com/dairuntime/dair/internal/store"
)

// member is one incarnation of this process in the cluster: an actor system (whose id is the
// member id), its membership and the node on it.
type member struct {
	system *actor.ActorSystem
	m      *cluster.Membership
	node   *actors.Node
	dead   chan struct{}
	// dup receives the older member of another process that uses this node's id.
	dup <-chan cluster.Member
}

// swapHandler serves the current incarnation's API; a restart under a new member id swaps it.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}
func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

// runCluster serves a cluster node. When the cluster declares this node dead (it was
// partitioned or paused past the failure timeout; its runs have moved under newer epochs), the
// node stops its runtime instances, leaves, and starts again under a new actor system id:
// protoactor blocks a departed member id forever, so the old id cannot rejoin.
func runCluster(ctx context.Context, opts Options, log *zap.Logger, st store.Store, verifier auth.Verifier) (err error) {
	r, err := newClusterRun(opts, log, st, verifier)
	if err != nil {
		return err
	}
	// Process hosts outlive a restart under a new member id; they stop with the process.
	defer func() {
		if herr := r.hs.stop(opts.ShutdownTimeout); herr != nil {
			err = errors.Join(err, herr)
		}
	}()
	return r.run(ctx)
}

// clusterRun is what a cluster node process keeps across its incarnations.
type clusterRun struct {
	opts     Options
	log      *zap.Logger
	st       store.Store
	verifier auth.Verifier
	ccfg     cluster.Config // membership settings of every incarnation
	specs    []actors.InstanceSpec
	hs       *hosts
	ff       *faults // nil unless FaultInjection
	h        *swapHandler
	handler  http.Handler // h, wrapped by ff
	ready    atomic.Bool
}

func newClusterRun(opts Options, log *zap.Logger, st store.Store, verifier auth.Verifier) (*clusterRun, error) {
	keyring, err := loadKeyring(opts.GossipKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	remoteTLS, err := loadRemoteTLS(opts, log)
	if err != nil {
		return nil, err
	}
	session, err := newSession()
	if err != nil {
		return nil, err
	}
	specs, err := opts.instanceSpecs()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	hs, err := newHosts(opts, log, st)
	if err != nil {
		return nil, err
	}
	r := &clusterRun{opts: opts, log: log, st: st, verifier: verifier, specs: specs, hs: hs, h: &swapHandler{},
		ccfg: cluster.Config{NodeID: opts.NodeID, BindAddr: opts.BindAddr, Join: opts.Join,
			Profile: cluster.Profile(opts.ClusterProfile), Roles: opts.Roles, ActorPort: opts.ActorPort, Keyring: keyring,
			RemoteTLS: remoteTLS, Session: session, Started: time.Now(), Logger: log}}
	r.handler = r.h
	if opts.FaultInjection {
		r.ff = &faults{}
		r.handler = r.ff.wrap(r.h)
		log.Warn("fault injection enabled: POST /debug/partition and /debug/heal cut this node off (tests only)")
	}
	return r, nil
}

// start joins the cluster under a new actor system id and starts the node on it. A first
// start refuses a node id that a live member of another process uses; a rejoin waits for a
// peer first.
func (r *clusterRun) start(ctx context.Context, rejoin bool) (*member, error) {
	ccfg := r.ccfg
	if r.ff != nil {
		ft, err := r.ff.newTransport(r.opts.BindAddr)
		if err != nil {
			return nil, err
		}
		ccfg.Transport = ft
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(logging.ActorLoggerFactory(r.log)))
	m, err := cluster.Start(ctx, sys, ccfg)
	if err != nil {
		sys.Shutdown()
		return nil, fmt.Errorf("server: join cluster: %w", err)
	}
	mb := &member{system: sys, m: m, dead: make(chan struct{})}
	if len(r.opts.Join) > 0 {
		if rejoin {
			// A node the cluster declared dead takes no work until the cluster has it back:
			// while still cut off (a partition that reaches the store but not the peers) its
			// own control plane would otherwise pump recovered runs onto itself, alone.
			err = awaitPeers(ctx, m, r.log)
		} else {
			err = checkNodeID(ctx, m, r.opts.NodeID)
		}
		if err != nil {
			// Leave gracefully on a refused id: the member that keeps it drops this one at once.
			r.abandon(mb, !rejoin)
			return nil, err
		}
	}
	if err := r.startNode(ctx, mb); err != nil {
		r.abandon(mb, false)
		return nil, err
	}
	r.log.Info("cluster member started", zap.String("member", sys.ID), zap.String("actor_address", sys.Address()))
	return mb, nil
}

// startNode starts the engine of incarnation mb and points the API at it.
func (r *clusterRun) startNode(ctx context.Context, mb *member) error {
	var once sync.Once
	cfg := actors.Config{NodeID: r.opts.NodeID, Store: r.st, Roles: r.opts.Roles, Logger: r.log, System: mb.system, Cluster: mb.m,
		OnDeclaredDead: func() { once.Do(func() { close(mb.dead) }) }, Instances: r.specs}
	r.hs.configure(&cfg, mb.system, mb.m, r.st)
	r.opts.Agents.configure(&cfg)
	if r.opts.ClusterProfile == string(cluster.ProfileLocal) {
		cfg.HeartbeatInterval, cfg.HeartbeatTTL, cfg.RecoveryInterval = 250*time.Millisecond, 1500*time.Millisecond, 250*time.Millisecond
	}
	cfg.LivenessTTL = r.opts.LivenessTTL
	node, err := actors.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("server: start node: %w", err)
	}
	mb.node, mb.dup = node, watchDuplicate(mb.m)
	if err := r.opts.Agents.subscribe(ctx, node); err != nil {
		return errors.Join(err, node.Stop(ctx))
	}
	r.hs.started(node, r.log)
	r.h.set(api.New(api.Config{Node: node, Auth: r.verifier, MaxBodyBytes: r.opts.MaxBodyBytes, SSEHeartbeat: r.opts.SSEHeartbeat,
		Logger: r.log, Ready: r.ready.Load, Cluster: mb.m, Limits: r.opts.limits(), MetricsAuth: r.opts.MetricsAuth}))
	return nil
}

// abandon leaves the cluster and shuts the actor system of an incarnation without a node.
func (r *clusterRun) abandon(mb *member, graceful bool) {
	if err := mb.m.Shutdown(graceful); err != nil {
		r.log.Warn("leave cluster", zap.Error(err))
	}
	mb.system.Shutdown()
}

// stop stops incarnation mb: its node, its membership, its actor system.
func (r *clusterRun) stop(mb *member, graceful bool) error {
	sctx, cancel := context.WithTimeout(context.Background(), r.opts.ShutdownTimeout)
	defer cancel()
	err := mb.node.Stop(sctx)
	if lerr := mb.m.Shutdown(graceful); lerr != nil {
		err = errors.Join(err, fmt.Errorf("server: leave cluster: %w", lerr))
	}
	mb.system.Shutdown()
	return err
}

// run starts the first incarnation, loads the pipelines, serves HTTP, and restarts under a
// new member id whenever the cluster declares the node dead, until ctx ends.
func (r *clusterRun) run(ctx context.Context) error {
	cur, err := r.start(ctx, false)
	if err != nil {
		return err
	}
	if r.opts.PipelinesDir != "" {
		if _, err := LoadPipelines(ctx, cur.node, r.opts.PipelinesDir, r.opts.limits()); err != nil {
			return errors.Join(err, r.stop(cur, true))
		}
	}
	sctx, cancelServe := context.WithCancel(ctx)
	defer cancelServe()
	served := make(chan error, 1)
	go func() { served <- serve(sctx, r.opts, r.log, r.handler, &r.ready, r.opts.NodeID) }()
	for {
		select {
		case err := <-served:
			return errors.Join(err, r.stop(cur, true))
		case d := <-cur.dup:
			cancelServe()
			return errors.Join(duplicateError(r.opts.NodeID, d), r.stop(cur, true), <-served)
		case <-cur.dead:
			r.log.Warn("restarting under a new member id after being declared dead", zap.String("old_member", cur.system.ID))
			r.ready.Store(false)
			r.h.set(api.Unavailable("rejoining", "server: this node is rejoining the cluster under a new member id"))
			if err := r.stop(cur, false); err != nil {
				r.log.Warn("stop dead incarnation", zap.Error(err))
			}
			next, err := r.start(ctx, true)
			if err != nil {
				cancelServe()
				return errors.Join(err, <-served)
			}
			cur = next
			r.ready.Store(true)
		}
	}
}

// rejoinLogEvery is how often a node waiting to rejoin says so.
const rejoinLogEvery = 10 * time.Second

// awaitPeers waits until the membership lists another member besides this one, or ctx ends.
func awaitPeers(ctx context.Context, m *cluster.Membership, log *zap.Logger) error {
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	started, logged := time.Now(), time.Now()
	for len(m.Members()) < 2 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("server: rejoin the cluster: %w", ctx.Err())
		case <-tk.C:
		}
		if time.Since(logged) >= rejoinLogEvery {
			logged = time.Now()
			log.Warn("waiting to rejoin the cluster before taking work", zap.Duration("waited", time.Since(started).Round(time.Second)))
		}
	}
	log.Info("rejoined the cluster", zap.Duration("waited", time.Since(started).Round(time.Millisecond)))
	return nil
}

// loadKeyring reads an optional memberlist key file (raw 16/24/32 bytes or base64).
func loadKeyring(path string) ([][]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gossip key: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && (len(k) == 16 || len(k) == 24 || len(k) == 32) {
		return [][]byte{k}, nil
	}
	if n := len(s); n == 16 || n == 24 || n == 32 {
		return [][]byte{[]byte(s)}, nil
	}
	return nil, fmt.Errorf("gossip key must be 16, 24 or 32 bytes (raw or base64)")
}
