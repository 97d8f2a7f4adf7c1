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
	keyring, err := loadKeyring(opts.GossipKeyFile)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	specs, err := opts.instanceSpecs()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	// Process hosts outlive a restart under a new member id; they stop with the process.
	hs, err := newHosts(opts, log, st)
	if err != nil {
		return err
	}
	defer func() {
		if herr := hs.stop(opts.ShutdownTimeout); herr != nil {
			err = errors.Join(err, herr)
		}
	}()
	var ready atomic.Bool
	h := &swapHandler{}
	var handler http.Handler = h
	var ff *faults
	if opts.FaultInjection {
		ff = &faults{}
		handler = ff.wrap(h)
		log.Warn("fault injection enabled: POST /debug/partition and /debug/heal cut this node off (tests only)")
	}
	start := func(rejoin bool) (*member, error) {
		ccfg := cluster.Config{NodeID: opts.NodeID, BindAddr: opts.BindAddr, Join: opts.Join,
			Profile: cluster.Profile(opts.ClusterProfile), Roles: opts.Roles, ActorPort: opts.ActorPort, Keyring: keyring, Logger: log}
		if ff != nil {
			ft, err := ff.newTransport(opts.BindAddr)
			if err != nil {
				return nil, err
			}
			ccfg.Transport = ft
		}
		sys := actor.NewActorSystem(actor.WithLoggerFactory(logging.ActorLoggerFactory(log)))
		m, err := cluster.Start(ctx, sys, ccfg)
		if err != nil {
			sys.Shutdown()
			return nil, fmt.Errorf("server: join cluster: %w", err)
		}
		mb := &member{system: sys, m: m, dead: make(chan struct{})}
		if rejoin && len(opts.Join) > 0 {
			// A node the cluster declared dead takes no work until the cluster has it back:
			// while still cut off (a partition that reaches the store but not the peers) its
			// own control plane would otherwise pump recovered runs onto itself, alone.
			if err := awaitPeers(ctx, m, log); err != nil {
				if serr := m.Shutdown(false); serr != nil {
					log.Warn("leave cluster", zap.Error(serr))
				}
				sys.Shutdown()
				return nil, err
			}
		}
		var once sync.Once
		cfg := actors.Config{NodeID: opts.NodeID, Store: st, Roles: opts.Roles, Logger: log, System: sys, Cluster: m,
			OnDeclaredDead: func() { once.Do(func() { close(mb.dead) }) }, Instances: specs}
		hs.configure(&cfg, sys, m, st)
		opts.Agents.configure(&cfg)
		if opts.ClusterProfile == string(cluster.ProfileLocal) {
			cfg.HeartbeatInterval, cfg.HeartbeatTTL, cfg.RecoveryInterval = 250*time.Millisecond, 1500*time.Millisecond, 250*time.Millisecond
		}
		node, err := actors.Start(ctx, cfg)
		if err != nil {
			if serr := m.Shutdown(false); serr != nil {
				log.Warn("leave cluster", zap.Error(serr))
			}
			sys.Shutdown()
			return nil, fmt.Errorf("server: start node: %w", err)
		}
		mb.node = node
		if err := opts.Agents.subscribe(ctx, node); err != nil {
			err = errors.Join(err, node.Stop(ctx), m.Shutdown(false))
			sys.Shutdown()
			return nil, err
		}
		hs.started(node, log)
		h.set(api.New(api.Config{Node: node, Auth: verifier, MaxBodyBytes: opts.MaxBodyBytes, SSEHeartbeat: opts.SSEHeartbeat,
			Logger: log, Ready: ready.Load, Cluster: m}))
		log.Info("cluster member started", zap.String("member", sys.ID), zap.String("actor_address", sys.Address()))
		return mb, nil
	}
	stop := func(mb *member, graceful bool) error {
		sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
		defer cancel()
		err := mb.node.Stop(sctx)
		if lerr := mb.m.Shutdown(graceful); lerr != nil {
			err = errors.Join(err, fmt.Errorf("server: leave cluster: %w", lerr))
		}
		mb.system.Shutdown()
		return err
	}
	cur, err := start(false)
	if err != nil {
		return err
	}
	if opts.PipelinesDir != "" {
		if _, err := LoadPipelines(ctx, cur.node, opts.PipelinesDir); err != nil {
			return errors.Join(err, stop(cur, true))
		}
	}
	sctx, cancelServe := context.WithCancel(ctx)
	defer cancelServe()
	served := make(chan error, 1)
	go func() { served <- serve(sctx, opts, log, handler, &ready, opts.NodeID) }()
	for {
		select {
		case err := <-served:
			return errors.Join(err, stop(cur, true))
		case <-cur.dead:
			log.Warn("restarting under a new member id after being declared dead", zap.String("old_member", cur.system.ID))
			ready.Store(false)
			h.set(api.Unavailable("rejoining", "server: this node is rejoining the cluster under a new member id"))
			if err := stop(cur, false); err != nil {
				log.Warn("stop dead incarnation", zap.Error(err))
			}
			next, err := start(true)
			if err != nil {
				cancelServe()
				return errors.Join(err, <-served)
			}
			cur = next
			ready.Store(true)
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
