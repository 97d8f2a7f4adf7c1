package hostmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/local"
)

// Sentinel errors of package hostmanager.
var (
	// ErrUnknownMode is returned by ParseMode and New for a mode that is not one of the Mode
	// constants.
	ErrUnknownMode = errors.New("hostmanager: unknown host mode")
	// ErrNotImplemented is returned by New for ModeKubernetes: the mode is part of the model
	// but not implemented in this build.
	ErrNotImplemented = errors.New("hostmanager: host mode not implemented in this build")
	// ErrInvalidConfig is returned by Config.Validate and New when a field the mode needs is
	// missing or unusable.
	ErrInvalidConfig = errors.New("hostmanager: invalid config")
	// ErrStopped is returned by CreateInstance and Attach after Stop.
	ErrStopped = errors.New("hostmanager: manager stopped")
	// ErrAttachOnly is returned by CreateInstance in ModeAttach: hosts are started elsewhere
	// and registered with Attach.
	ErrAttachOnly = errors.New("hostmanager: attach mode does not create hosts")
	// ErrInvalidDescriptor is returned by Attach for a descriptor without an instance id or
	// without an address to reach it.
	ErrInvalidDescriptor = errors.New("hostmanager: invalid descriptor")
)

// Mode is how a Manager creates runtime hosts.
type Mode string

// Host creation modes.
const (
	// ModeFixture creates instances in-process, on the node's own runtime host.
	ModeFixture Mode = "fixture"
	// ModeProcess spawns one `dair node --roles runtime` child process per instance.
	ModeProcess Mode = "process"
	// ModeAttach creates nothing: externally managed runtime nodes join the cluster and
	// register themselves; Attach records them.
	ModeAttach Mode = "attach"
	// ModeKubernetes is reserved for pod-based hosts; New returns ErrNotImplemented.
	ModeKubernetes Mode = "kubernetes"
)

// String returns the mode's name.
func (m Mode) String() string { return string(m) }

// ParseMode returns the Mode named s, or an error wrapping ErrUnknownMode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeFixture, ModeProcess, ModeAttach, ModeKubernetes:
		return m, nil
	}
	return "", fmt.Errorf("%w %q (want fixture, process, attach or kubernetes)", ErrUnknownMode, s)
}

// Defaults of Config's zero fields.
const (
	DefaultStopTimeout = 5 * time.Second
	DefaultReapAfter   = 30 * time.Second
)

// Config configures a Manager. The zero value of each field means its default.
type Config struct {
	// Mode selects how hosts are created. Default ModeFixture.
	Mode Mode
	// Fixture is the in-process host CreateInstance delegates to in ModeFixture. Required there.
	Fixture local.Host

	// Binary is the dair executable spawned in ModeProcess. Default os.Executable().
	Binary string
	// StoreURL is the children's --store (a redis:// URL). Required in ModeProcess.
	StoreURL string
	// Seeds returns the memberlist addresses the children join (--join), read at every spawn.
	// Required in ModeProcess.
	Seeds func() []string
	// ClusterProfile is the children's --cluster-profile. Default "lan".
	ClusterProfile string
	// LogLevel is the children's --log-level. Default "info".
	LogLevel string
	// DataDir holds one log file per host (DataDir/hosts/host-<id>.log, appended across
	// restarts). Default os.TempDir()/dair-hosts.
	DataDir string
	// ExtraArgs are appended to every child's command line. Optional.
	ExtraArgs []string
	// Env is added to the children's environment (on top of this process's). Optional.
	Env []string
	// StartDelay delays every spawn (a test hook that widens the Provisioning window). Default 0.
	StartDelay time.Duration
	// StopTimeout is how long a stopping child gets after SIGTERM before SIGKILL. Default 5s.
	StopTimeout time.Duration
	// Instances lists the live registry. With it, a child whose instance has been absent from
	// the registry for ReapAfter (scaled in or to zero) is stopped. Optional.
	Instances func(ctx context.Context) ([]*messages.CapacityDescriptor, error)
	// ReapAfter is how long a child may host no registered instance before it is stopped.
	// Default 30s.
	ReapAfter time.Duration
	// OnExit is called (from the child's supervising goroutine) after a child exits. Optional;
	// it must not block for long.
	OnExit func(Exit)
	// Logger receives the manager's logs. Default: no logging.
	Logger *zap.Logger
}

// Validate reports the first missing or unusable field for the mode, wrapping
// ErrInvalidConfig (or ErrUnknownMode, ErrNotImplemented). It does no I/O.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	switch c.Mode {
	case ModeKubernetes:
		return fmt.Errorf("%w: %s", ErrNotImplemented, c.Mode)
	case ModeFixture:
		if c.Fixture == nil {
			return fmt.Errorf("%w: fixture mode needs Fixture", ErrInvalidConfig)
		}
	case ModeProcess:
		switch {
		case c.StoreURL == "":
			return fmt.Errorf("%w: process mode needs StoreURL", ErrInvalidConfig)
		case c.Seeds == nil:
			return fmt.Errorf("%w: process mode needs Seeds", ErrInvalidConfig)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeFixture
	}
	if c.ClusterProfile == "" {
		c.ClusterProfile = "lan"
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(os.TempDir(), "dair-hosts")
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.ReapAfter <= 0 {
		c.ReapAfter = DefaultReapAfter
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Host describes one runtime host known to the manager.
type Host struct {
	// InstanceID is the runtime instance the host serves.
	InstanceID string
	// HostID is the host's node id ("host-<instance id>" for process hosts).
	HostID string
	// Mode is how the host was created (ModeProcess) or registered (ModeAttach).
	Mode Mode
	// PID is the child's process id (process hosts).
	PID int
	// LogPath is the child's log file (process hosts).
	LogPath string
	// Address is the attached host's actor address (attached hosts).
	Address string
	// ScaleOutRequestID is the request the host was created for, if any.
	ScaleOutRequestID string
	// StartedAt is when the child started or the host was attached.
	StartedAt time.Time
	// ManagedElsewhere is true for attached hosts: the manager never stops them.
	ManagedElsewhere bool
}

// Exit reports a child process that ended.
type Exit struct {
	Host Host
	// Err is the wait error (nil for a zero exit status).
	Err error
	// Requested is true when the manager stopped the child (Stop, replacement, reaping).
	Requested bool
}

// Manager creates runtime hosts in one Mode and supervises the ones it spawned. It implements
// providers/local.Host. All methods are goroutine-safe.
type Manager struct {
	cfg     Config
	metrics *metrics

	// mu guards stopped, children and attached.
	mu       sync.Mutex
	stopped  bool
	children map[string]*child // by instance id: the current child of each instance
	attached map[string]Host   // by instance id

	wg       sync.WaitGroup // supervising goroutines and the reaper
	stopOnce sync.Once
	stopCh   chan struct{}
}

var _ local.Host = (*Manager)(nil)

// New validates cfg and returns a Manager. In ModeProcess with Instances set it starts the
// reaper goroutine; Stop ends it.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Mode == ModeProcess && cfg.Binary == "" {
		bin, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: find own executable: %v", ErrInvalidConfig, err)
		}
		cfg.Binary = bin
	}
	m := &Manager{cfg: cfg, metrics: newMetrics(), children: map[string]*child{}, attached: map[string]Host{},
		stopCh: make(chan struct{})}
	if cfg.Mode == ModeProcess && cfg.Instances != nil {
		m.wg.Add(1)
		go m.reap()
	}
	return m, nil
}

// Mode returns the manager's mode.
func (m *Manager) Mode() Mode { return m.cfg.Mode }

// CreateInstance creates a host for runtime instance id serving settings. In ModeFixture it
// delegates to the in-process host; in ModeProcess it spawns a child and returns once the child
// has started (not once the instance is ready: the scale-out provider waits for readiness in the
// registry); in ModeAttach it returns ErrAttachOnly.
//
// A child still running for the same id (it serves no registered instance, or the provider
// would not have picked the id) is stopped first. It blocks for at most StartDelay plus
// StopTimeout plus the spawn, or until ctx ends.
func (m *Manager) CreateInstance(ctx context.Context, id string, settings *messages.TenantSettings, scaleOutRequestID string) error {
	if m.isStopped() {
		return ErrStopped
	}
	switch m.cfg.Mode {
	case ModeFixture:
		if err := m.cfg.Fixture.CreateInstance(ctx, id, settings, scaleOutRequestID); err != nil {
			return fmt.Errorf("hostmanager: create fixture instance %s: %w", id, err)
		}
		return nil
	case ModeAttach:
		return fmt.Errorf("%w: start `dair node --roles runtime --instance %s` to provide it", ErrAttachOnly, id)
	default:
		return m.spawn(ctx, id, settings, scaleOutRequestID)
	}
}

// Attach records an externally managed runtime endpoint. The runtime node registers its
// instance itself (a `dair node --roles runtime --instance ID` joining the cluster); Attach only
// records it as managed elsewhere, so Hosts lists it and the manager never stops it. d must name
// the instance and its actor address or endpoint. Attaching an id twice replaces the record.
func (m *Manager) Attach(_ context.Context, d *messages.CapacityDescriptor) error {
	if d.GetRuntimeInstanceId() == "" {
		return fmt.Errorf("%w: missing runtime instance id", ErrInvalidDescriptor)
	}
	addr := d.GetAddress()
	if addr == "" {
		addr = d.GetEndpoint()
	}
	if addr == "" {
		return fmt.Errorf("%w: instance %s has no address or endpoint", ErrInvalidDescriptor, d.GetRuntimeInstanceId())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	m.attached[d.RuntimeInstanceId] = Host{InstanceID: d.RuntimeInstanceId, HostID: d.GetHostId(), Mode: ModeAttach,
		Address: addr, StartedAt: time.Now(), ManagedElsewhere: true}
	m.metrics.attached.Inc()
	m.cfg.Logger.Info("runtime host attached", zap.String("runtime_instance_id", d.RuntimeInstanceId), zap.String("address", addr))
	return nil
}

// Hosts returns the running children and the attached hosts, ordered by instance id. The caller
// owns the returned slice.
func (m *Manager) Hosts() []Host {
	m.mu.Lock()
	out := make([]Host, 0, len(m.children)+len(m.attached))
	for _, c := range m.children {
		out = append(out, c.host)
	}
	for _, h := range m.attached {
		out = append(out, h)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out
}

// Collectors returns the manager's Prometheus collectors (host starts, exits by cause, running
// hosts, attached hosts), for registration on a node's registry. A collector may be registered
// on several registries.
func (m *Manager) Collectors() []prometheus.Collector { return m.metrics.collectors() }

// Stop stops every child: SIGTERM, then SIGKILL after StopTimeout, and waits for the
// supervising goroutines until ctx ends. Attached hosts are left alone. It is idempotent;
// CreateInstance and Attach fail with ErrStopped afterwards.
func (m *Manager) Stop(ctx context.Context) error {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.stopped = true
		kids := make([]*child, 0, len(m.children))
		for _, c := range m.children {
			kids = append(kids, c)
		}
		m.mu.Unlock()
		close(m.stopCh)
		var wg sync.WaitGroup
		for _, c := range kids {
			wg.Add(1)
			go func(c *child) {
				defer wg.Done()
				c.terminate(m.cfg.StopTimeout)
			}(c)
		}
		wg.Wait()
	})
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hostmanager: stop: %w", ctx.Err())
	}
}

func (m *Manager) isStopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

// metrics are the manager's collectors. Their methods are goroutine-safe.
type metrics struct {
	starts   prometheus.Counter
	exits    *prometheus.CounterVec
	running  prometheus.Gauge
	attached prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "dair_host_starts_total",
			Help: "Runtime host child processes started by the host manager."}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dair_host_exits_total",
			Help: "Runtime host child processes that exited, by cause (requested or unexpected)."}, []string{"cause"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dair_hosts_running",
			Help: "Runtime host child processes running."}),
		attached: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dair_hosts_attached",
			Help: "Externally managed runtime hosts attached to the host manager."}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.starts, m.exits, m.running, m.attached}
}
