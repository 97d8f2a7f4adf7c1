package grpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/remote"
)

// Name is the provider name and the transport name of the gRPC transport.
const Name = "grpc"

// Config configures the gRPC provider. The zero value of each field means its default.
type Config struct {
	// Remote is the hardening (timeout, retries, circuit); its Prefix is set to "grpc".
	Remote remote.Config
	// TLS is the client TLS configuration for grpcs:// endpoints. Default: the system roots.
	TLS *tls.Config
	// ScaleOut, Lookup and ReadyTimeout make the provider a scale-out provider (see
	// remote.ClientConfig).
	ScaleOut     providers.ScaleOuter
	Lookup       func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)
	ReadyTimeout time.Duration
}

// Provider is the "grpc" provider. All methods are goroutine-safe.
type Provider struct {
	*remote.Client
	tr *transport
}

var (
	_ providers.Dispatcher   = (*Provider)(nil)
	_ providers.StatusReader = (*Provider)(nil)
	_ providers.Controller   = (*Provider)(nil)
	_ providers.ScaleOuter   = (*Provider)(nil)
	_ remote.Transport       = (*transport)(nil)
)

// New returns the gRPC provider. Connections are opened on first use, one per endpoint, and
// closed by Close.
func New(cfg Config) *Provider {
	cfg.Remote.Prefix = Name
	tr := &transport{conns: newConns(cfg.TLS)}
	c := remote.NewClient(remote.ClientConfig{Name: Name, Transport: tr, Caller: remote.NewCaller(cfg.Remote), ScaleOut: cfg.ScaleOut,
		Lookup: cfg.Lookup, ReadyTimeout: cfg.ReadyTimeout})
	return &Provider{Client: c, tr: tr}
}

// Close closes every connection. It is idempotent.
func (p *Provider) Close() error { return p.tr.conns.close() }

// Invoke calls runtime.v1.RuntimeService.Invoke on the host of d with the tenant metadata of
// req's snapshot, and returns the event stream. The stream ends with the run's terminal event
// or when ctx ends.
func (p *Provider) Invoke(ctx context.Context, d *messages.CapacityDescriptor, req *messages.InvokeRequest) (grpc.ServerStreamingClient[messages.InvokeEvent], error) {
	target, err := p.tr.Endpoint(d)
	if err != nil {
		return nil, err
	}
	cc, err := p.tr.conns.get(target)
	if err != nil {
		return nil, err
	}
	return messages.NewRuntimeServiceClient(cc).Invoke(withTenant(ctx, req.GetSnapshot()), req)
}

// transport sends runtime commands as typed RPCs.
type transport struct{ conns *conns }

// Endpoint returns the dial target of d's endpoint: "grpc://H:P", "grpcs://H:P", "http://H:P",
// "https://H:P" or "H:P".
func (t *transport) Endpoint(d *messages.CapacityDescriptor) (string, error) {
	ep := strings.TrimRight(d.GetEndpoint(), "/")
	if ep == "" {
		return "", remote.ErrNoEndpoint
	}
	if _, _, err := splitEndpoint(ep); err != nil {
		return "", remote.Fail(remote.ClassEndpointInvalid, err)
	}
	return ep, nil
}

// splitEndpoint returns the host:port of ep and whether it asks for TLS.
func splitEndpoint(ep string) (hostport string, secure bool, err error) {
	rest := ep
	for _, s := range []struct {
		prefix string
		tls    bool
	}{{"grpc://", false}, {"http://", false}, {"grpcs://", true}, {"https://", true}} {
		if r, ok := strings.CutPrefix(ep, s.prefix); ok {
			rest, secure = r, s.tls
			break
		}
	}
	if _, _, err := net.SplitHostPort(rest); err != nil || strings.Contains(rest, "/") {
		return "", false, fmt.Errorf("grpc: endpoint %q is not [grpc[s]://]HOST:PORT", ep)
	}
	return rest, secure, nil
}

// Send calls the typed RPC of cmd on endpoint.
func (t *transport) Send(ctx context.Context, endpoint string, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, error) {
	cc, err := t.conns.get(endpoint)
	if err != nil {
		return nil, remote.Fail(remote.ClassEndpointInvalid, err)
	}
	cl := messages.NewRuntimeInstanceServiceClient(cc)
	out := &messages.RuntimeCommandResult{CommandId: cmd.GetCommandId()}
	switch c := cmd.GetCommand().(type) {
	case *messages.RuntimeCommand_Dispatch:
		ctx = withTenant(ctx, c.Dispatch.GetSnapshot())
		out.Result, err = cl.Dispatch(ctx, c.Dispatch)
	case *messages.RuntimeCommand_Status:
		out.Status, err = cl.QueueStatus(ctx, c.Status)
		out.Result = out.Status.GetResult()
	case *messages.RuntimeCommand_RunStatus:
		out.RunStatus, err = cl.RunStatus(ctx, c.RunStatus)
		out.Result = out.RunStatus.GetResult()
	case *messages.RuntimeCommand_Control:
		out.Result, err = cl.Control(ctx, c.Control)
	case *messages.RuntimeCommand_Heartbeat:
		out.Heartbeat, err = cl.Heartbeat(ctx, c.Heartbeat)
		if err == nil {
			out.Result = providers.Success(Name, cmd.GetRuntimeInstanceId(), remote.OpHeartbeat)
		}
	default:
		return nil, remote.Fail(remote.ClassNonRetryable, fmt.Errorf("grpc: unknown command %T", c))
	}
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// classify maps a gRPC status to an attempt failure class.
func classify(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return remote.Classify(err)
	}
	switch st.Code() {
	case codes.Unavailable:
		return remote.Fail(remote.ClassUnavailable, err)
	case codes.DeadlineExceeded:
		return remote.Fail(remote.ClassTimeout, err)
	case codes.Canceled:
		return remote.Fail(remote.ClassException, err)
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated,
		codes.Unimplemented, codes.AlreadyExists, codes.OutOfRange:
		return remote.Fail(remote.ClassNonRetryable, err)
	default: // ResourceExhausted, Aborted, Internal, Unknown, DataLoss
		return remote.Fail(remote.ClassFailed, err)
	}
}

// withTenant adds the snapshot's tenant metadata to ctx's outgoing metadata.
func withTenant(ctx context.Context, s *messages.ExecutionContextSnapshot) context.Context {
	kv := messages.TenantMetadata(s)
	if len(kv) == 0 {
		return ctx
	}
	pairs := make([]string, 0, 2*len(kv))
	for _, p := range kv {
		pairs = append(pairs, p[0], p[1])
	}
	return metadata.AppendToOutgoingContext(ctx, pairs...)
}

// conns caches one client connection per endpoint.
type conns struct {
	tls *tls.Config

	// mu guards m and closed.
	mu     sync.Mutex
	m      map[string]*grpc.ClientConn
	closed bool
}

func newConns(cfg *tls.Config) *conns { return &conns{tls: cfg, m: map[string]*grpc.ClientConn{}} }

// get returns the connection of endpoint, creating it (without dialing: gRPC connects lazily).
func (c *conns) get(endpoint string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.m[endpoint]; ok {
		return cc, nil
	}
	if c.closed {
		return nil, fmt.Errorf("grpc: provider closed")
	}
	hostport, secure, err := splitEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if secure {
		cfg := c.tls
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient("passthrough:///"+hostport, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("grpc: client for %s: %w", endpoint, err)
	}
	c.m[endpoint] = cc
	return cc, nil
}

// close closes every connection; later gets fail.
func (c *conns) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var first error
	for ep, cc := range c.m {
		if err := cc.Close(); err != nil && first == nil {
			first = fmt.Errorf("grpc: close %s: %w", ep, err)
		}
		delete(c.m, ep)
	}
	return first
}

// WithScaleOut returns a provider sharing p's connections and circuits whose scale-out goes
// through s (the host manager's provider); each new instance is proven ready through this
// transport (a status call) before the scale-out succeeds.
func (p *Provider) WithScaleOut(s providers.ScaleOuter, lookup func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)) *Provider {
	q := *p
	q.Client = p.Client.WithScaleOut(s, lookup)
	return &q
}
