package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
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
	// DisableHandOff makes every submit store its run before placing it: a queue-first one
	// goes through the shared queue and the pump, a direct one through a separate dispatch.
	// Default false: a submit hands its run straight to an instance (creating it assigned in one
	// store call) when the node's instance view shows tenant-visible free capacity and the
	// pump's last cycle left no run waiting.
	DisableHandOff bool
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
	// LivenessTTL is the length of the liveness lease each node of a cluster renews against
	// the store; a peer that has not renewed it for LivenessTTL (while this node's own
	// renewals went through) is declared lost, whatever the gossip's timing. Default 1s.
	LivenessTTL time.Duration
	// LivenessInterval is how often a node renews its liveness lease and checks its peers'
	// (lease, and a connection attempt to their actor endpoint: refused means the process is
	// gone). Default LivenessTTL/4.
	LivenessInterval time.Duration
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

// Validate reports a configuration Start would refuse (no store, an unknown role or submit
// mode, invalid lifecycle timings).
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns c with every zero field set to its default, or why c is invalid.
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
	def(&c.LivenessTTL, time.Second)
	def(&c.LivenessInterval, c.LivenessTTL/4)
	if c.LivenessInterval >= c.LivenessTTL {
		return c, fmt.Errorf("actors: config: LivenessInterval %s must be shorter than LivenessTTL %s", c.LivenessInterval, c.LivenessTTL)
	}
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
