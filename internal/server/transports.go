package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/runtimehost"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	grpcprov "github.com/dairuntime/dair/providers/grpc"
	httpprov "github.com/dairuntime/dair/providers/http"
	"github.com/dairuntime/dair/providers/local"
	"github.com/dairuntime/dair/providers/rcq"
	"github.com/dairuntime/dair/providers/remote"
)

// TransportOptions configures how a node reaches, and serves, runtime instances over remote
// transports (flags --host-transport and --runtime-*). The zero value of each field means its
// default.
type TransportOptions struct {
	// HostTransport is actor, http, grpc or redis-command-queue. On a node that runs runtime
	// instances created at start (--instance, --runtime-pool) it is what this host serves; with
	// HostMode process it is also what the spawned process hosts serve, and the scale-out
	// provider. Default actor.
	HostTransport string
	// Listen is the HTTP or gRPC listen address of this host's runtime transport. Default
	// 127.0.0.1:0; a non-loopback address needs TLS.
	Listen string
	// Pool, when > 0, makes this runtime node a pooled host: it creates the shared instances
	// runtime-<transport>-1..Pool, each its own dispatch target with its own queue and slots.
	Pool int
	// TLSCert, TLSKey and TLSCA are PEM files of the runtime transport's TLS (HTTP and gRPC):
	// a host serves with the certificate (and requires client certificates signed by the CA);
	// a control plane presents the certificate and verifies hosts with the CA.
	TLSCert, TLSKey, TLSCA string
	// CallTimeout bounds one attempt of a remote provider call. Default 5s.
	CallTimeout time.Duration
	// CallAttempts bounds the attempts of one remote provider call. Default 3.
	CallAttempts int
}

// serves reports whether this node serves its start-up instances over a remote transport.
func (o Options) serves() bool {
	t := o.Transport.HostTransport
	return t != "" && t != runtimehost.TransportActor && hasRole(o.Roles, actors.RoleRuntime) && (o.Instance != "" || o.Transport.Pool > 0)
}

// validateTransports checks the transport options against the store scheme, the host mode and
// the roles. It returns an unwrapped error; Validate wraps it.
func (o Options) validateTransports(scheme string) error {
	t := o.Transport
	if t.HostTransport == "" {
		t.HostTransport = runtimehost.TransportActor
	}
	if _, err := runtimehost.ParseTransport(t.HostTransport); err != nil {
		return err
	}
	if t.Pool < 0 || t.CallAttempts < 0 || t.CallTimeout < 0 {
		return errors.New("--runtime-pool, --runtime-call-attempts and --runtime-call-timeout must not be negative")
	}
	if t.Pool > 0 && !hasRole(o.Roles, actors.RoleRuntime) {
		return errors.New("--runtime-pool needs the runtime role")
	}
	if (t.TLSCert == "") != (t.TLSKey == "") {
		return errors.New("--runtime-tls-cert and --runtime-tls-key go together")
	}
	if t.HostTransport == runtimehost.TransportActor {
		return nil
	}
	if scheme != SchemeRedis || !o.clustered() {
		return fmt.Errorf("--host-transport %s needs a redis store and cluster mode (--bind HOST:PORT)", t.HostTransport)
	}
	if !o.serves() && o.HostMode != HostProcess {
		return fmt.Errorf("--host-transport %s needs --host-mode process, or the runtime role with --instance or --runtime-pool", t.HostTransport)
	}
	return nil
}

// transports is a node process's runtime transport wiring: the remote providers its control
// plane dispatches through and, on a runtime host, the server of its instances. It lives as
// long as the process (across incarnations under new member ids).
type transports struct {
	opts Options
	log  *zap.Logger
	rdb  redis.UniversalClient // nil without a redis store
	http *httpprov.Provider
	grpc *grpcprov.Provider
	rcq  *rcq.Provider // nil without a redis store
	host *runtimehost.Host
	node atomic.Pointer[actors.Node] // the current incarnation, served by host
}

// newTransports builds the providers and, when this node serves its instances remotely,
// binds the transport server (so the instances publish its endpoint).
func newTransports(opts Options, log *zap.Logger) (*transports, error) {
	clientTLS, serverTLS, err := loadTransportTLS(opts.Transport)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	rc := remote.Config{Timeout: opts.Transport.CallTimeout, Attempts: opts.Transport.CallAttempts}
	tr := &transports{opts: opts, log: log, http: httpprov.New(httpprov.Config{Remote: rc, TLS: clientTLS}),
		grpc: grpcprov.New(grpcprov.Config{Remote: rc, TLS: clientTLS})}
	if scheme, _, err := splitStoreURL(opts.StoreURL); err == nil && scheme == SchemeRedis {
		ro, err := redis.ParseURL(opts.StoreURL)
		if err != nil {
			return nil, fmt.Errorf("%w: store url: %v", ErrInvalidOptions, err)
		}
		ro.PoolSize = 128 // every command-queue call waits for its reply on a connection
		tr.rdb = redis.NewClient(ro)
		tr.rcq = rcq.New(rcq.Config{Client: tr.rdb, Remote: rc})
	}
	if opts.serves() {
		tr.host, err = runtimehost.Bind(runtimehost.Config{Transport: opts.Transport.HostTransport, Listen: opts.Transport.Listen,
			TLS: serverTLS, Redis: tr.rdb, ConsumerName: opts.NodeID + "-" + ids.New("c"), Logger: log})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("server: runtime transport: %w", err), tr.close(context.Background()))
		}
		log.Info("runtime transport bound", zap.String("transport", opts.Transport.HostTransport), zap.String("endpoint", tr.host.Endpoint()))
	}
	return tr, nil
}

// configure registers the remote providers in cfg, gives the start-up instances (and the pool)
// this host's transport, and, when scale-out spawns process hosts serving a remote transport,
// makes that transport's provider the scale-out provider over process (the host manager's).
func (t *transports) configure(cfg *actors.Config, process providers.ScaleOuter, lookup func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)) {
	hp, gp, qp := t.http, t.grpc, t.rcq
	if process != nil {
		switch t.opts.Transport.HostTransport {
		case runtimehost.TransportHTTP:
			hp = hp.WithScaleOut(process, lookup)
			cfg.ScaleOutProvider = httpprov.Name
		case runtimehost.TransportGRPC:
			gp = gp.WithScaleOut(process, lookup)
			cfg.ScaleOutProvider = grpcprov.Name
		case runtimehost.TransportRCQ:
			if qp != nil {
				qp = qp.WithScaleOut(process, lookup)
				cfg.ScaleOutProvider = rcq.Name
			}
		}
	}
	cfg.Providers = append(cfg.Providers, hp, gp)
	if qp != nil {
		cfg.Providers = append(cfg.Providers, qp)
	}
	if t.host == nil {
		return
	}
	specs := append([]actors.InstanceSpec(nil), cfg.Instances...)
	for i := 1; i <= t.opts.Transport.Pool; i++ {
		specs = append(specs, actors.InstanceSpec{ID: "runtime-" + t.opts.Transport.HostTransport + "-" + strconv.Itoa(i)})
	}
	for i := range specs {
		specs[i].Transport = t.host.InstanceTransport(specs[i].ID)
	}
	cfg.Instances = specs
}

// started points the transport server at the new incarnation's node (serving it on the first
// call).
func (t *transports) started(node *actors.Node) {
	if t.host == nil {
		return
	}
	if t.node.Swap(node) == nil {
		t.host.Serve(runtimehost.Target{Backend: &currentBackend{t: t}, Instances: t.instances, Invoker: &nodeInvoker{node: t.node.Load}})
	}
}

func (t *transports) instances() []string {
	if n := t.node.Load(); n != nil {
		return n.LocalInstanceIDs()
	}
	return nil
}

// close stops the transport server and closes the providers' connections.
func (t *transports) close(ctx context.Context) error {
	var err error
	if t.host != nil {
		err = t.host.Stop(ctx)
	}
	t.http.Close()
	err = errors.Join(err, t.grpc.Close())
	if t.rdb != nil {
		err = errors.Join(err, t.rdb.Close())
	}
	return err
}

// currentBackend is the local provider of the current incarnation's node.
type currentBackend struct{ t *transports }

var _ remote.Backend = (*currentBackend)(nil)

func (b *currentBackend) local() *local.Provider {
	if n := b.t.node.Load(); n != nil {
		if p, ok := n.Providers().Lookup(local.Name); ok {
			if lp, ok := p.(*local.Provider); ok {
				return lp
			}
		}
	}
	return local.New(local.Config{}) // answers provider-misconfigured
}

// Name returns "local".
func (b *currentBackend) Name() string { return local.Name }

// Dispatch delivers to the current node's instance.
func (b *currentBackend) Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	return b.local().Dispatch(ctx, d, req)
}

// RunStatus reads from the current node's instance.
func (b *currentBackend) RunStatus(ctx context.Context, d *messages.CapacityDescriptor, localRunID string) *messages.RunStatus {
	return b.local().RunStatus(ctx, d, localRunID)
}

// QueueStatus reads from the current node's instance.
func (b *currentBackend) QueueStatus(ctx context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus {
	return b.local().QueueStatus(ctx, d)
}

// Control sends to the current node's instance.
func (b *currentBackend) Control(ctx context.Context, d *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult {
	return b.local().Control(ctx, d, req)
}

// loadTransportTLS reads the runtime transport's TLS files: the client side presents the
// certificate and trusts the CA; the server side serves the certificate and, with a CA,
// requires client certificates it signed. Without files both are nil.
func loadTransportTLS(o TransportOptions) (client, server *tls.Config, err error) {
	if o.TLSCert == "" && o.TLSCA == "" {
		return nil, nil, nil
	}
	client = &tls.Config{MinVersion: tls.VersionTLS12}
	var certs []tls.Certificate
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("runtime tls: %w", err)
		}
		certs = []tls.Certificate{cert}
		client.Certificates = certs
	}
	var pool *x509.CertPool
	if o.TLSCA != "" {
		pem, err := os.ReadFile(o.TLSCA)
		if err != nil {
			return nil, nil, fmt.Errorf("runtime tls: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("runtime tls: no certificate in %s", o.TLSCA)
		}
		client.RootCAs = pool
	}
	if len(certs) > 0 {
		server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs}
		if pool != nil {
			server.ClientCAs, server.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
	}
	return client, server, nil
}

// childArgs are the flags a process host needs to serve this node's host transport.
func (o TransportOptions) childArgs() []string {
	if o.HostTransport == "" || o.HostTransport == runtimehost.TransportActor {
		return nil
	}
	args := []string{"--host-transport", o.HostTransport}
	for _, f := range [][2]string{{"--runtime-tls-cert", o.TLSCert}, {"--runtime-tls-key", o.TLSKey}, {"--runtime-tls-ca", o.TLSCA}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	return args
}
