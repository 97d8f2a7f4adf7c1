package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/metrics"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
)

// stopWait bounds how long Stop waits for the node's background goroutines once cancelled.
const stopWait = 10 * time.Second

// startupRecoveryBound bounds the recovery round a node with the control-plane role runs before
// its pump starts.
const startupRecoveryBound = 5 * time.Second

// Node is one running dair node: an actor system with the node's supervision tree, the
// control-plane services, the committer, the publisher, and the worker group that owns every
// background goroutine of the node. Its methods are goroutine-safe.
type Node struct {
	env       *env
	plane     *plane
	providers *providers.Registry
	ownSystem bool
	root      *actor.PID
	host      atomic.Pointer[actor.PID] // the runtime host actor, once the tree has started

	stopping  atomic.Bool        // set when Stop begins: Submit refuses from then on
	stopWatch context.CancelFunc // ends the cluster watch (watch.go)
	stopOnce  sync.Once
	stopErr   error
	deadOnce  sync.Once
	live      liveness // this node's liveness lease (liveness.go)

	agents *agentRuntime // agent messaging (agent_runtime.go)

	// queueing holds a tenant with max_queued_runs from its queue count to its enqueue, so
	// this node's concurrent submits cannot overshoot the limit (Submit).
	queueing keyedLocks
}

// Start builds and starts a node. It returns once the supervision tree has started and the
// configured instances exist.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Handlers == nil {
		cfg.Handlers = step.NewRegistry()
		if err := handlers.Register(cfg.Handlers, handlers.Options{}); err != nil {
			return nil, fmt.Errorf("register built-in handlers: %w", err)
		}
	}
	sys := cfg.System
	own := sys == nil
	if own {
		sys = actor.NewActorSystem(actor.WithLoggerFactory(cfg.ActorLogger))
	}
	n := &Node{env: newEnv(cfg, sys), ownSystem: own}
	if err := n.wire(); err != nil {
		n.abort(ctx)
		return nil, err
	}
	// The liveness lease is taken before the node advertises anything (its peers judge only
	// members they once saw alive).
	n.startLiveness(ctx)
	if cfg.has(RoleControlPlane) {
		// Queue items this node's pump claimed before a crash come back now, not after the
		// claims' visibility timeout: that pump is gone.
		if k, err := n.plane.recoverer.ReleasePumpClaims(ctx, cfg.NodeID); err != nil {
			n.env.log.Warn("release the claims of an earlier run of this node's pump", zap.Error(err))
		} else if k > 0 {
			n.env.log.Info("released the claims of an earlier run of this node's pump", zap.Int("items", k))
		}
		// The runs an earlier run of this node was executing are requeued, at the front of
		// their queues, before this node's pump takes any: else a run queued behind them takes
		// the slot (a tenant's concurrency quota) of the run that was mid-step. Bounded: a huge
		// backlog of them is left to the recovery loop.
		rctx, cancel := context.WithTimeout(ctx, startupRecoveryBound)
		if err := n.plane.recoverer.Round(rctx, false); err != nil {
			n.env.log.Warn("recovery round at start", zap.Error(err))
		}
		cancel()
	}
	if err := n.spawnTree(ctx); err != nil {
		n.abort(ctx)
		return nil, err
	}
	for _, spec := range cfg.Instances {
		if err := n.CreateInstance(ctx, spec); err != nil {
			if serr := sys.Root.StopFuture(n.root).Wait(); serr != nil {
				n.env.log.Warn("stop node actor", zap.Error(serr))
			}
			n.abort(ctx)
			return nil, err
		}
	}
	if err := n.startAgents(ctx); err != nil {
		return nil, errors.Join(err, n.Stop(ctx))
	}
	n.env.agentNode.Store(n)
	n.startWatch()
	n.env.log.Info("node started", zap.Strings("roles", cfg.Roles), zap.String("incarnation", n.env.incarnation))
	return n, nil
}

// newEnv builds what the node's actors share and starts the writer loops in the node's group.
func newEnv(cfg Config, sys *actor.ActorSystem) *env {
	e := &env{
		nodeID: cfg.NodeID, incarnation: sys.ID, system: sys, st: cfg.Store, log: cfg.Logger.With(zap.String("node_id", cfg.NodeID)),
		hub: NewHub(), handlers: cfg.Handlers, dir: newDirectory(), metrics: nodeMetrics{metrics.New()}, cfg: cfg, now: cfg.Now,
		group: workgroup.New(),
	}
	e.life, _ = cfg.Store.(store.ExecutionLifecycle)
	e.prestarts = newPrestarts(e)
	if f, ok := cfg.Store.(store.CommitFinisher); ok && e.life != nil {
		e.foldsFinish = f.FinishesCommits()
	}
	e.awaits = newRunWatch(cfg.Store, e.group, e.log)
	e.pipelines = newPipelineCache(cfg.Store, cfg.Handlers)
	c := ledger.NewCommitter(cfg.Store, ledger.CommitterConfig{Shards: cfg.CommitShards, Batch: cfg.CommitBatch, Log: e.log, Notifier: e.hub})
	e.commits = &committer{c}
	e.history = ledger.NewWriter(cfg.Store, ledger.WriterConfig{Committer: c, Notifier: e.hub, Log: e.log})
	e.pub = newPublisher(cfg.Store, e.log, e.metrics.Metrics, cfg.HeartbeatTTL, cfg.ReservationTTL, e.incarnation)
	e.mailboxes, e.steps = newAgentDispatcher(e.group), newAgentDispatcher(e.group)
	c.Start(e.group)
	e.pub.start(e.group)
	e.group.Tick(agentPoolIdle, func() {
		e.mailboxes.rotate()
		e.steps.rotate()
	})
	return e
}

// wire registers the providers and builds the control-plane services.
func (n *Node) wire() error {
	e, cfg := n.env, n.env.cfg
	if cfg.Cluster != nil {
		e.pub.setOnDead(func() { n.declaredDead("registry") })
	}
	n.providers = providers.NewRegistry(providers.WithObserver(func(r *messages.ProviderResult, _ time.Duration) { e.metrics.Provider(r) }))
	lp := local.New(local.Config{System: e.system, Directory: e.dir, Host: &hostHandle{env: e, pid: n.hostPID}, Instances: cfg.Store.ListInstances,
		InUse: InstanceIDInUse(cfg.Store), ReadyTimeout: 10 * time.Second})
	if err := n.providers.Register(lp); err != nil {
		return err
	}
	if cfg.Cluster != nil {
		if err := n.providers.Register(newActorProvider(e, cfg.Cluster)); err != nil {
			return err
		}
	}
	for _, p := range cfg.Providers {
		if err := n.providers.Register(p); err != nil {
			return fmt.Errorf("register provider: %w", err)
		}
	}
	pl, err := newPlane(e, n.providers)
	if err != nil {
		return fmt.Errorf("actors: %w", err)
	}
	n.plane = pl
	return nil
}

// hostPID returns the runtime host actor once the tree has started (nil before, and without
// the runtime role).
func (n *Node) hostPID() *actor.PID { return n.host.Load() }

// spawnTree starts the supervision tree and waits until its top has started or ctx ends.
func (n *Node) spawnTree(ctx context.Context) error {
	e := n.env
	started := make(chan *actor.PID, 1)
	props := actor.PropsFromProducer(func() actor.Actor {
		return &nodeActor{env: e, plane: n.plane, onStarted: func(host *actor.PID) {
			select {
			case started <- host:
			default: // a restart: the PIDs stay the same
			}
		}}
	}, actor.WithGuardian(nodeSupervisor), actor.WithSupervisor(nodeSupervisor))
	root, err := e.system.Root.SpawnNamed(props, "node-"+e.nodeID)
	if err != nil {
		return fmt.Errorf("spawn node actor: %w", err)
	}
	n.root = root
	select {
	case host := <-started:
		n.host.Store(host)
		return nil
	case <-ctx.Done():
		if err := e.system.Root.StopFuture(root).Wait(); err != nil {
			e.log.Warn("stop node actor", zap.Error(err))
		}
		return ctx.Err()
	}
}

// Stop shuts the node down in order, like memberlist's Shutdown:
//
//  1. stop intake: Submit answers ErrStopped, the cluster watch ends;
//  2. stop the supervision tree (control plane, instances and their executions; in-flight
//     steps are cancelled, their committed state stays) and wait until it is gone or ctx ends;
//  3. cancel the node's worker group and wait for its goroutines, at most stopWait: background
//     work returns, and the committer and publisher write what they hold;
//  4. shut the actor system down when the node created it.
//
// It is idempotent (later calls return the first call's result) and does not close the store.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() { n.stopErr = n.stop(ctx) })
	return n.stopErr
}

func (n *Node) stop(ctx context.Context) error {
	n.stopping.Store(true)
	n.stopAgents(ctx)
	if n.stopWatch != nil {
		n.stopWatch()
	}
	var errs []error
	if n.root != nil {
		if err := n.stopTree(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop node actor: %w", err))
		}
	}
	if err := n.stopGroup(ctx); err != nil {
		errs = append(errs, err)
	}
	if n.ownSystem {
		n.env.system.Shutdown()
	}
	return errors.Join(errs...)
}

// abort undoes a Start that failed after newEnv.
func (n *Node) abort(ctx context.Context) {
	if err := n.stopGroup(ctx); err != nil {
		n.env.log.Warn("stop after a failed start", zap.Error(err))
	}
	if n.ownSystem {
		n.env.system.Shutdown()
	}
}

// stopGroup cancels the node's worker group and waits for it, at most stopWait.
func (n *Node) stopGroup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
	defer cancel()
	if err := n.env.group.Stop(ctx); err != nil {
		stacks := groupStacks()
		n.env.log.Error("background work outlived the stop", zap.Error(err), zap.String("goroutines", stacks))
		return &OutlivedStopError{Err: err, Stacks: stacks}
	}
	return nil
}

// OutlivedStopError is Node.Stop's error when background work of the node was still running
// when the stop's wait ended. Stacks holds those goroutines' stacks (also logged), for a test
// or an operator to tell which work it was.
type OutlivedStopError struct {
	Err    error
	Stacks string
}

func (e *OutlivedStopError) Error() string {
	return "actors: background work outlived the stop: " + e.Err.Error()
}

// Unwrap returns the worker group's error.
func (e *OutlivedStopError) Unwrap() error { return e.Err }

// groupStacks returns the stacks of the goroutines the worker group started, for the log of
// a stop that they outlived.
func groupStacks() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/workgroup.(*Group)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// stopTree stops the supervision tree and waits until it is gone or ctx ends (a node with
// 100k executions takes longer than a default future timeout to stop).
func (n *Node) stopTree(ctx context.Context) error {
	sys := n.env.system
	sys.Root.Stop(n.root)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if _, alive := sys.ProcessRegistry.GetLocal(n.root.Id); !alive {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// System returns the node's actor system.
func (n *Node) System() *actor.ActorSystem { return n.env.system }

// Store returns the node's store.
func (n *Node) Store() store.Store { return n.env.st }

// Metrics returns the node's Prometheus collectors.
func (n *Node) Metrics() *Metrics { return n.env.metrics.Metrics }

// Hub returns the node's change notifier (for streams).
func (n *Node) Hub() *Hub { return n.env.hub }

// Handlers returns the node's handler registry.
func (n *Node) Handlers() *step.Registry { return n.env.handlers }

// Providers returns the node's provider registry.
func (n *Node) Providers() *providers.Registry { return n.providers }

// ID returns the node id; Incarnation the actor system id of this process.
func (n *Node) ID() string          { return n.env.nodeID }
func (n *Node) Incarnation() string { return n.env.incarnation }

// HostPID returns the runtime host actor (nil without the runtime role).
func (n *Node) HostPID() *actor.PID { return n.hostPID() }

// CreateInstance starts a runtime instance on this node (role runtime). It blocks until the
// instance actor exists; the instance registers itself in the store asynchronously.
func (n *Node) CreateInstance(ctx context.Context, spec InstanceSpec) error {
	if n.hostPID() == nil {
		return errors.New("actors: node has no runtime role")
	}
	return (&hostHandle{env: n.env, pid: n.hostPID}).create(ctx, spec)
}

// LocalInstance returns the PID of a runtime instance hosted by this node.
func (n *Node) LocalInstance(id string) (*actor.PID, bool) { return n.env.dir.Lookup(id) }

// LocalInstanceIDs lists the runtime instances hosted by this node.
func (n *Node) LocalInstanceIDs() []string { return n.env.dir.ids() }
