package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/hostmanager"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
)

// HostKubernetes is accepted by name and rejected as not implemented in this build.
const HostKubernetes = "kubernetes"

// processReadyTimeout bounds the wait for a process host's instance to be ready in the
// registry (a child process starts, joins the cluster and registers).
const processReadyTimeout = 30 * time.Second

// validateHosts checks HostMode against the store scheme, cluster mode and roles, and the
// --instance options. It returns an unwrapped error; Validate wraps it.
func (o Options) validateHosts(scheme string) error {
	switch o.HostMode {
	case HostFixture:
	case HostProcess:
		if scheme != SchemeRedis || !o.clustered() {
			return errors.New("host mode process needs a redis store (--store redis://HOST:PORT/DB) and cluster mode (--bind HOST:PORT)")
		}
		if !hasRole(o.Roles, actors.RoleControlPlane) {
			return errors.New("host mode process needs the control-plane role")
		}
	case HostAttach:
		if !o.clustered() {
			return errors.New("host mode attach needs cluster mode (--bind HOST:PORT): attached runtime nodes join the cluster")
		}
	case HostKubernetes:
		return errors.New("host mode kubernetes is not implemented in this build (use fixture, process or attach)")
	default:
		return fmt.Errorf("unknown host mode %q (want fixture, process or attach)", o.HostMode)
	}
	if o.Instance == "" {
		if o.InstanceSettings != "" || o.InstanceScaleOutRequest != "" {
			return errors.New("--instance-settings and --instance-scale-out-request need --instance")
		}
		return nil
	}
	if !hasRole(o.Roles, actors.RoleRuntime) {
		return errors.New("--instance needs the runtime role")
	}
	_, err := o.instanceSpecs()
	return err
}

// instanceSpecs returns the runtime instances to create at start (Options.Instance).
func (o Options) instanceSpecs() ([]actors.InstanceSpec, error) {
	if o.Instance == "" {
		return nil, nil
	}
	var settings *messages.TenantSettings
	if o.InstanceSettings != "" {
		settings = &messages.TenantSettings{}
		if err := protojson.Unmarshal([]byte(o.InstanceSettings), settings); err != nil {
			return nil, fmt.Errorf("--instance-settings: %w", err)
		}
	}
	settings = tenancy.Normalize(settings)
	if err := tenancy.Validate(settings); err != nil {
		return nil, fmt.Errorf("--instance-settings: %w", err)
	}
	return []actors.InstanceSpec{{ID: o.Instance, Settings: settings, ScaleOutRequestID: o.InstanceScaleOutRequest}}, nil
}

func hasRole(roles []string, role string) bool {
	for _, r := range roles {
		if r == role {
			return true
		}
	}
	return false
}

// hosts wires the host manager of a cluster node: it lives as long as the process (children
// survive a restart of the node under a new member id) and joins children to the current
// incarnation's memberlist address.
type hosts struct {
	mgr  *hostmanager.Manager   // nil in fixture mode
	tr   *transports            // the runtime transports (transports.go)
	seed atomic.Pointer[string] // memberlist address of the current incarnation
}

// newHosts returns the host wiring for opts: the host manager (process and attach modes) and
// the runtime transports.
func newHosts(opts Options, log *zap.Logger, st store.Store) (*hosts, error) {
	tr, err := newTransports(opts, log)
	if err != nil {
		return nil, err
	}
	h := &hosts{tr: tr}
	if opts.HostMode != HostProcess && opts.HostMode != HostAttach {
		return h, nil
	}
	mgr, err := hostmanager.New(hostmanager.Config{Mode: hostmanager.Mode(opts.HostMode), Binary: opts.HostBinary,
		StoreURL: opts.StoreURL, Seeds: h.seeds, ClusterProfile: opts.ClusterProfile, LogLevel: opts.LogLevel,
		DataDir: opts.DataDir, StartDelay: opts.HostStartDelay, Instances: st.ListInstances, Logger: log.Named("hosts"),
		ExtraArgs: append(opts.childArgs(), opts.Transport.childArgs()...)})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("server: host manager: %w", err), tr.close(context.Background()))
	}
	h.mgr = mgr
	return h, nil
}

func (h *hosts) seeds() []string {
	if s := h.seed.Load(); s != nil && *s != "" {
		return []string{*s}
	}
	return nil
}

// configure points the node config of a new incarnation at the host manager: in process mode
// the "process" provider becomes the scale-out provider; in attach mode the cluster's "actor"
// provider keeps placing instances on runtime members (the attached nodes).
func (h *hosts) configure(cfg *actors.Config, sys *actor.ActorSystem, m *cluster.Membership, st store.Store) {
	if h == nil {
		return
	}
	addr := m.Self().MemberlistAddr
	h.seed.Store(&addr)
	if h.mgr == nil || h.mgr.Mode() != hostmanager.ModeProcess {
		h.tr.configure(cfg, nil, nil)
		return
	}
	p := hostmanager.NewProvider(local.Config{Name: hostmanager.ProviderName, System: sys, Resolver: actors.RemotePID,
		Host: h.mgr, Instances: st.ListInstances, InUse: actors.InstanceIDInUse(st), ReadyTimeout: processReadyTimeout})
	cfg.Providers = append(cfg.Providers, providers.Provider(p))
	cfg.ScaleOutProvider = hostmanager.ProviderName
	// With a remote host transport, that transport's provider becomes the scale-out provider:
	// the host manager spawns the host, the transport proves it ready.
	h.tr.configure(cfg, p, st.GetInstance)
}

// started registers the manager's metrics on the node's registry.
func (h *hosts) started(node *actors.Node, log *zap.Logger) {
	if h == nil {
		return
	}
	h.tr.started(node)
	if h.mgr == nil {
		return
	}
	for _, c := range h.mgr.Collectors() {
		if err := node.Metrics().Registry.Register(c); err != nil {
			log.Warn("register host manager metrics", zap.Error(err))
		}
	}
}

// stop stops every process host.
func (h *hosts) stop(timeout time.Duration) error {
	if h == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := h.tr.close(ctx)
	if h.mgr != nil {
		if merr := h.mgr.Stop(ctx); merr != nil {
			err = errors.Join(err, fmt.Errorf("server: stop hosts: %w", merr))
		}
	}
	return err
}
