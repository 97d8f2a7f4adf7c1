package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
)

// Roles a node can play.
const (
	RoleControlPlane = "control-plane"
	RoleRuntime      = "runtime"
)

// Submit modes.
const (
	// SubmitQueueFirst stores the run and puts it in the shared queue; the pump admits it.
	SubmitQueueFirst = "queue-first"
	// SubmitDirect admits and dispatches in the caller's goroutine, queueing only when admission
	// says QueueGlobally.
	SubmitDirect = "direct"
)

// Config configures a node. The zero value of each field means its default.
type Config struct {
	// NodeID names the node (its host id in descriptors). Default: the host name.
	NodeID string
	// Store is the durable state. Required. The node does not close it.
	Store store.Store
	// Roles the node plays. Default: control-plane and runtime.
	Roles []string
	// Handlers are the step handlers. Default: a registry with the built-in handlers.
	Handlers *step.Registry
	// Logger receives the node's logs. Default: no logging.
	Logger *zap.Logger
	// ActorLogger is protoactor's logger factory. Default: discard.
	ActorLogger func(*actor.ActorSystem) *slog.Logger
	// System is an actor system to use (cluster mode). Default: a new local system.
	System *actor.ActorSystem
	// ControlPlaneID is the logical control-plane scope. Default "default".
	ControlPlaneID string
	// SubmitMode is SubmitQueueFirst (default) or SubmitDirect.
	SubmitMode string
	// HeartbeatInterval is how often instances publish capacity. Default 1s.
	HeartbeatInterval time.Duration
	// HeartbeatTTL is how long a descriptor stays live without a heartbeat, and the staleness
	// bound admission applies. Default 5s.
	HeartbeatTTL time.Duration
	// ReservationTTL bounds a slot hold; instances refresh holds of their runs. Default 30s.
	ReservationTTL time.Duration
	// QueueVisibility is how long a pump's claim hides a queue item. Default 30s.
	QueueVisibility time.Duration
	// PumpInterval is the pump's tick. Default 100ms.
	PumpInterval time.Duration
	// PumpBatch is the claim size of one pump cycle. Default 128.
	PumpBatch int
	// PumpParallelism bounds concurrent dispatches of one cycle. Default 32.
	PumpParallelism int
	// DefaultStepTimeout applies to steps without a timeout. Default 5m.
	DefaultStepTimeout time.Duration
	// RecoveryInterval is the recovery coordinator's tick. Default 1s.
	RecoveryInterval time.Duration
	// ScaleOutProvider is the configured default scale-out provider. Default "local".
	ScaleOutProvider string
	// ScaleOutCooldown keeps a failed scale-out counting as pending. Default 2s.
	ScaleOutCooldown time.Duration
	// CommitShards and CommitBatch tune the step committer. Defaults 4 and 256.
	CommitShards, CommitBatch int
	// Instances are created at start (role runtime) in addition to scale-out.
	Instances []InstanceSpec
	// Providers are registered besides the local provider.
	Providers []providers.Provider
	// Cluster is the node's cluster membership (nil: a single node). With it the node registers
	// the "actor" provider (instances on any member, reached by PID), makes it the default
	// scale-out provider, declares lost members dead and recovers their runs.
	Cluster *cluster.Membership
	// OnDeclaredDead is called (once, from a background goroutine) when this node learns that
	// the cluster declared it dead; its runtime instances are already stopped. The process
	// should restart its actor system under a new id. Optional.
	OnDeclaredDead func()
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Lifecycle configures the per-tenant runtime lifecycle (seed 001: idle timeout, sweeps,
	// cold start, zero retention). Zero fields mean lifecycle.DefaultConfig's values.
	Lifecycle lifecycle.Config
	// AgentTypes are the built-in agent types this node owns ("echo", "counter"; agent.go).
	AgentTypes []string
	// Agents tunes agent messaging; zero fields mean agents.DefaultConfig's values.
	Agents agents.Config
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("actors: config: Store is required")
	}
	if c.NodeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "node"
		}
		c.NodeID = h
	}
	if len(c.Roles) == 0 {
		c.Roles = []string{RoleControlPlane, RoleRuntime}
	}
	for _, r := range c.Roles {
		if r != RoleControlPlane && r != RoleRuntime {
			return c, fmt.Errorf("actors: config: unknown role %q (want %s or %s)", r, RoleControlPlane, RoleRuntime)
		}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.ActorLogger == nil {
		c.ActorLogger = func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }
	}
	if c.ControlPlaneID == "" {
		c.ControlPlaneID = "default"
	}
	switch c.SubmitMode {
	case "":
		c.SubmitMode = SubmitQueueFirst
	case SubmitQueueFirst, SubmitDirect:
	default:
		return c, fmt.Errorf("actors: config: unknown submit mode %q", c.SubmitMode)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, time.Second)
	def(&c.HeartbeatTTL, 5*time.Second)
	def(&c.ReservationTTL, 30*time.Second)
	def(&c.QueueVisibility, 30*time.Second)
	def(&c.PumpInterval, 100*time.Millisecond)
	def(&c.DefaultStepTimeout, 5*time.Minute)
	def(&c.RecoveryInterval, time.Second)
	def(&c.ScaleOutCooldown, 2*time.Second)
	if c.PumpBatch <= 0 {
		c.PumpBatch = 128
	}
	if c.PumpParallelism <= 0 {
		c.PumpParallelism = 32
	}
	if c.ScaleOutProvider == "" {
		c.ScaleOutProvider = local.Name
		if c.Cluster != nil {
			c.ScaleOutProvider = ActorProviderName
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := c.Lifecycle.Validate(); err != nil {
		return c, fmt.Errorf("actors: config: %w", err)
	}
	c.Lifecycle = c.Lifecycle.WithDefaults()
	return c, nil
}

func (c Config) has(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// stopWait bounds how long Stop waits for the node's background goroutines once cancelled.
const stopWait = 10 * time.Second

// Node is one running dair node: an actor system with the node's supervision tree, the
// committer, the publisher and the control-plane logic. Its methods are goroutine-safe.
type Node struct {
	env       *env
	core      *core
	providers *providers.Registry
	ownSystem bool
	root      *actor.PID
	host      *actor.PID
	pump      *actor.PID
	scaleOut  *actor.PID

	stopOnce  sync.Once
	stopErr   error
	watchStop chan struct{}
	watchDone chan struct{}
	deadOnce  sync.Once

	lifecycle *tenantLifecycle // per-tenant runtime lifecycle (tenantscope.go)
	agents    *agentRuntime    // agent messaging (agent_runtime.go)
}

// Start builds and starts a node. It returns once the supervision tree has started.
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
	e := &env{
		nodeID: cfg.NodeID, incarnation: sys.ID, system: sys, st: cfg.Store, log: cfg.Logger.With(zap.String("node_id", cfg.NodeID)),
		hub: NewHub(), handlers: cfg.Handlers, dir: newDirectory(), metrics: NewMetrics(), cfg: cfg, now: cfg.Now,
		group: workgroup.New(),
	}
	e.pipelines = newPipelineCache(cfg.Store, cfg.Handlers)
	e.commits = newCommitter(cfg.Store, e.log, e.hub, cfg.CommitShards, cfg.CommitBatch)
	e.pub = newPublisher(cfg.Store, e.log, e.metrics, cfg.HeartbeatTTL, cfg.ReservationTTL, e.incarnation)
	e.usageW = newUsageWriter(cfg.Store, e.log)
	n := &Node{env: e, ownSystem: own}
	if cfg.Cluster != nil {
		e.pub.mu.Lock()
		e.pub.onDead = func() { n.declaredDead("registry") }
		e.pub.mu.Unlock()
	}
	n.providers = providers.NewRegistry(providers.WithObserver(func(r *messages.ProviderResult, _ time.Duration) { e.metrics.provider(r) }))
	hh := &hostHandle{env: e}
	lp := local.New(local.Config{System: sys, Directory: e.dir, Host: hh, Instances: cfg.Store.ListInstances, InUse: InstanceIDInUse(cfg.Store),
		ReadyTimeout: 10 * time.Second})
	if err := n.providers.Register(lp); err != nil {
		return nil, err
	}
	if cfg.Cluster != nil {
		if err := n.providers.Register(newActorProvider(e, cfg.Cluster)); err != nil {
			return nil, err
		}
	}
	for _, p := range cfg.Providers {
		if err := n.providers.Register(p); err != nil {
			return nil, fmt.Errorf("register provider: %w", err)
		}
	}
	n.core = &core{env: e, providers: n.providers, tenants: newTTLCache[*messages.TenantSettings](time.Second), circuits: newCircuits()}
	n.core.scaleOutCreated = func(id string) {
		if n.scaleOut != nil {
			sys.Root.Send(n.scaleOut, &scaleOutCreated{id: id})
		}
	}
	n.core.wakePump = func() {
		if n.pump != nil {
			sys.Root.Send(n.pump, &pumpWake{})
		}
	}
	n.lifecycle = newTenantLifecycle(n, cfg.Lifecycle)
	if cfg.has(RoleControlPlane) {
		// Queue items this node's pump claimed before a crash come back now, not after the
		// claims' visibility timeout: that pump is gone.
		if k, err := cfg.Store.ReleaseClaimsOf(ctx, pumpIDOf(e.nodeID)); err != nil {
			e.log.Warn("release the claims of an earlier run of this node's pump", zap.Error(err))
		} else if k > 0 {
			e.log.Info("released the claims of an earlier run of this node's pump", zap.Int("items", k))
		}
	}
	started := make(chan struct{})
	props := actor.PropsFromProducer(func() actor.Actor {
		return &nodeActor{env: e, core: n.core, lifecycle: n.lifecycle, controlPlane: cfg.has(RoleControlPlane), runtime: cfg.has(RoleRuntime),
			onStarted: func(h, p, s *actor.PID) {
				select {
				case <-started:
				default:
					n.host, n.pump, n.scaleOut = h, p, s
					close(started)
				}
			}}
	}, actor.WithGuardian(actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)))
	root, err := sys.Root.SpawnNamed(props, "node-"+cfg.NodeID)
	if err != nil {
		n.shutdownParts()
		return nil, fmt.Errorf("spawn node actor: %w", err)
	}
	n.root = root
	select {
	case <-started:
	case <-ctx.Done():
		if err := sys.Root.StopFuture(root).Wait(); err != nil {
			e.log.Warn("stop node actor", zap.Error(err))
		}
		n.shutdownParts()
		return nil, ctx.Err()
	}
	hh.pid = n.host
	for _, spec := range cfg.Instances {
		if err := hh.CreateInstance(ctx, spec.ID, spec.Settings, ""); err != nil {
			if serr := sys.Root.StopFuture(root).Wait(); serr != nil {
				e.log.Warn("stop node actor", zap.Error(serr))
			}
			n.shutdownParts()
			return nil, err
		}
	}
	if err := n.startAgents(ctx); err != nil {
		return nil, errors.Join(err, n.Stop(ctx))
	}
	n.watchDone = make(chan struct{})
	n.watchStop = make(chan struct{})
	go n.watch()
	e.log.Info("node started", zap.Strings("roles", cfg.Roles), zap.String("incarnation", e.incarnation))
	return n, nil
}

// Stop shuts the node down in order: stop intake (control plane), stop instances and
// executions (in-flight steps are cancelled; their committed state stays), flush the
// committer, publisher and usage writer. It is idempotent; it does not close the store.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.stopAgents(ctx)
		if n.watchStop != nil {
			close(n.watchStop)
			<-n.watchDone
		}
		if n.root != nil {
			if err := n.stopTree(ctx); err != nil {
				n.stopErr = fmt.Errorf("stop node actor: %w", err)
			}
		}
		n.shutdownParts()
	})
	return n.stopErr
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

func (n *Node) shutdownParts() {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	if err := n.env.group.Stop(ctx); err != nil {
		n.env.log.Warn("background work outlived the stop wait", zap.Error(err))
	}
	cancel()
	n.env.commits.close()
	n.env.pub.close()
	n.env.usageW.close()
	if n.ownSystem {
		n.env.system.Shutdown()
	}
}

// System returns the node's actor system.
func (n *Node) System() *actor.ActorSystem { return n.env.system }

// Store returns the node's store.
func (n *Node) Store() store.Store { return n.env.st }

// Metrics returns the node's Prometheus collectors.
func (n *Node) Metrics() *Metrics { return n.env.metrics }

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
func (n *Node) HostPID() *actor.PID { return n.host }

// CreateInstance starts a runtime instance on this node (role runtime).
func (n *Node) CreateInstance(ctx context.Context, spec InstanceSpec) error {
	if n.host == nil {
		return errors.New("actors: node has no runtime role")
	}
	return (&hostHandle{env: n.env, pid: n.host}).CreateInstance(ctx, spec.ID, spec.Settings, spec.ScaleOutRequestID)
}

// LocalInstance returns the PID of a runtime instance hosted by this node.
func (n *Node) LocalInstance(id string) (*actor.PID, bool) { return n.env.dir.Lookup(id) }

// LocalInstanceIDs lists the runtime instances hosted by this node.
func (n *Node) LocalInstanceIDs() []string { return n.env.dir.ids() }
