// Package runtimehost serves a runtime host's instances over a remote transport: the HTTP
// command server, the gRPC services or the Redis command-queue consumer of packages
// providers/http, providers/grpc and providers/rcq. A node that runs runtime instances for a
// control plane reached over HTTP, gRPC or Redis (a process host, a pooled host) binds a Host
// before it starts (so its instances can publish the endpoint), then starts serving once the
// node runs.
//
// # Usage
//
//	h, err := runtimehost.Bind(runtimehost.Config{Transport: "http", Listen: "127.0.0.1:0"})
//	spec.Transport = h.InstanceTransport(spec.ID)
//	node, err := actors.Start(ctx, actors.Config{..., Instances: []actors.InstanceSpec{spec}})
//	h.Serve(runtimehost.Target{Backend: localProvider, Instances: node.LocalInstanceIDs})
//	defer h.Stop(ctx)
package runtimehost

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	nethttp "net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/netaddr"
	grpcprov "github.com/dairuntime/dair/providers/grpc"
	httpprov "github.com/dairuntime/dair/providers/http"
	"github.com/dairuntime/dair/providers/rcq"
	"github.com/dairuntime/dair/providers/remote"
)

// Transport names a runtime host serves (actor is the cluster's own, served by no Host).
const (
	TransportActor = "actor"
	TransportHTTP  = httpprov.Name
	TransportGRPC  = grpcprov.Name
	TransportRCQ   = rcq.Name
)

// ErrUnknownTransport is returned by Bind and ParseTransport for a transport that is not one of
// actor, http, grpc or redis-command-queue.
var ErrUnknownTransport = errors.New("runtimehost: unknown transport")

// ParseTransport returns s when it names a transport, else an error wrapping
// ErrUnknownTransport.
func ParseTransport(s string) (string, error) {
	switch s {
	case TransportActor, TransportHTTP, TransportGRPC, TransportRCQ:
		return s, nil
	}
	return "", fmt.Errorf("%w %q (want actor, http, grpc or redis-command-queue)", ErrUnknownTransport, s)
}

// Config configures Bind.
type Config struct {
	// Transport is http, grpc or redis-command-queue. Required.
	Transport string
	// Listen is the HTTP or gRPC listen address. Default 127.0.0.1:0. Plaintext is refused on a
	// non-loopback address.
	Listen string
	// TLS is the server TLS configuration of HTTP and gRPC (mutual TLS when it has ClientCAs
	// and ClientAuth). Nil: plaintext on loopback.
	TLS *tls.Config
	// Redis is the command streams' Redis (redis-command-queue). Required there; not closed.
	Redis redis.UniversalClient
	// ConsumerName names this process in the streams' consumer group. Required for
	// redis-command-queue.
	ConsumerName string
	// Logger receives the servers' warnings. Default: none.
	Logger *zap.Logger
}

// Target is what a Host serves: the node's instances.
type Target struct {
	// Backend reaches the instances (the node's "local" provider). Required.
	Backend remote.Backend
	// Instances lists the ids served. Required.
	Instances remote.Instances
	// Invoker serves seed 001's Invoke (gRPC only). Optional.
	Invoker grpcprov.Invoker
}

// Host is one transport server of a runtime host. Serve and Stop may be called once each;
// Endpoint and InstanceTransport are goroutine-safe.
type Host struct {
	cfg      Config
	ln       net.Listener
	endpoint string

	httpSrv *nethttp.Server
	grpcSrv *grpc.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stop    sync.Once
}

// Bind validates cfg and, for HTTP and gRPC, listens. It does not serve yet.
func Bind(cfg Config) (*Host, error) {
	if _, err := ParseTransport(cfg.Transport); err != nil || cfg.Transport == TransportActor {
		return nil, fmt.Errorf("%w %q", ErrUnknownTransport, cfg.Transport)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	h := &Host{cfg: cfg}
	if cfg.Transport == TransportRCQ {
		if cfg.Redis == nil || cfg.ConsumerName == "" {
			return nil, errors.New("runtimehost: redis-command-queue needs Redis and ConsumerName")
		}
		return h, nil
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
		h.cfg.Listen = cfg.Listen
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("runtimehost: listen address %q: %w", cfg.Listen, err)
	}
	if cfg.TLS == nil && !netaddr.IsLoopback(host) {
		return nil, fmt.Errorf("runtimehost: %s on non-loopback %q needs TLS", cfg.Transport, cfg.Listen)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("runtimehost: listen on %s: %w", cfg.Listen, err)
	}
	h.ln = ln
	scheme := map[string][2]string{TransportHTTP: {"http", "https"}, TransportGRPC: {"grpc", "grpcs"}}[cfg.Transport]
	s := scheme[0]
	if cfg.TLS != nil {
		s = scheme[1]
	}
	h.endpoint = s + "://" + ln.Addr().String()
	return h, nil
}

// Endpoint returns the host's endpoint ("" for redis-command-queue: each instance has its own
// stream).
func (h *Host) Endpoint() string { return h.endpoint }

// InstanceTransport returns what instance id publishes to be reached through this host.
func (h *Host) InstanceTransport(id string) actors.InstanceTransport {
	tr := actors.InstanceTransport{Provider: h.cfg.Transport, Name: h.cfg.Transport, Endpoint: h.endpoint}
	if h.cfg.Transport == TransportRCQ {
		key := rcq.StreamKey(id)
		tr.Endpoint, tr.Metadata = key, map[string]string{rcq.MetadataQueueKey: key}
	}
	return tr
}

// Serve starts serving t in the background. It returns at once.
func (h *Host) Serve(t Target) {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	switch h.cfg.Transport {
	case TransportHTTP:
		h.httpSrv = &nethttp.Server{Handler: httpprov.NewHandler(t.Backend, t.Instances), ReadHeaderTimeout: 10 * time.Second,
			TLSConfig: h.cfg.TLS, ErrorLog: zap.NewStdLog(h.cfg.Logger.Named("runtime-http"))}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			var err error
			if h.cfg.TLS != nil {
				err = h.httpSrv.ServeTLS(h.ln, "", "")
			} else {
				err = h.httpSrv.Serve(h.ln)
			}
			if err != nil && !errors.Is(err, nethttp.ErrServerClosed) {
				h.cfg.Logger.Error("runtime http server", zap.Error(err))
			}
		}()
	case TransportGRPC:
		h.grpcSrv = grpcprov.NewServer(grpcprov.ServerConfig{Backend: t.Backend, Instances: t.Instances, Invoker: t.Invoker, TLS: h.cfg.TLS})
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			if err := h.grpcSrv.Serve(h.ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				h.cfg.Logger.Error("runtime grpc server", zap.Error(err))
			}
		}()
	case TransportRCQ:
		c := rcq.NewConsumer(rcq.ConsumerConfig{Client: h.cfg.Redis, Backend: t.Backend, Instances: t.Instances, Name: h.cfg.ConsumerName,
			Logger: h.cfg.Logger.Named("rcq")})
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			c.Run(ctx)
		}()
	}
}

// Stop stops serving: intake first, then waits for the requests in flight until ctx ends. It
// is idempotent.
func (h *Host) Stop(ctx context.Context) error {
	var err error
	h.stop.Do(func() {
		switch {
		case h.httpSrv != nil:
			if serr := h.httpSrv.Shutdown(ctx); serr != nil {
				err = errors.Join(fmt.Errorf("runtimehost: stop http: %w", serr), h.httpSrv.Close())
			}
		case h.grpcSrv != nil:
			done := make(chan struct{})
			go func() { h.grpcSrv.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				h.grpcSrv.Stop()
			}
		case h.ln != nil:
			err = h.ln.Close()
		}
		if h.cancel != nil {
			h.cancel()
		}
		h.wg.Wait()
	})
	return err
}
