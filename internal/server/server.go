package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/logging"
)

// HTTP server timeouts. WriteTimeout stays 0: event streams are long-lived.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	// streamGrace is how long Shutdown lets open requests finish before their contexts are
	// cancelled (ending event streams, which clients resume with Last-Event-ID).
	streamGrace = time.Second
)

// Run serves one node until ctx ends. In order it validates opts, builds the logger and the
// token verifier, opens the store, starts the node, loads PipelinesDir, and serves the API;
// /readyz answers 200 from then on and opts.OnReady is called.
//
// When ctx ends (SIGINT/SIGTERM in the binary) it shuts down in order: /readyz turns 503 and
// HTTP intake stops (graceful Shutdown bounded by ShutdownTimeout; open event streams are
// cut after a short grace), then the node stops, then the store closes. A clean shutdown
// returns nil.
//
// Errors wrap ErrInvalidOptions (bad options, unreadable key files) or ErrBadPipeline (a bad
// pipeline file, named with the validator's reason); other errors are operational (store
// unreachable or locked, address in use). Run blocks; call it once per process.
func Run(ctx context.Context, opts Options) (err error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	log, err := logging.New(logging.Config{Level: opts.LogLevel, Format: opts.LogFormat, Output: opts.LogOutput})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	redis.SetLogger(redisLogger{log: log})
	var verifier auth.Verifier
	if opts.Auth == AuthJWT {
		verifier, err = auth.LoadVerifier(opts.JWTSecretFile, opts.JWTPublicKeyFile,
			auth.WithAudience(opts.JWTAudience), auth.WithIssuer(opts.JWTIssuer))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
		}
	}
	st, err := OpenStore(ctx, opts.StoreURL)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("server: close store: %w", cerr))
		}
	}()

	if opts.clustered() {
		return runCluster(ctx, opts, log, st, verifier)
	}
	specs, err := opts.instanceSpecs()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	cfg := actors.Config{
		NodeID: opts.NodeID, Store: st, Roles: opts.Roles, Logger: log, ActorLogger: logging.ActorLoggerFactory(log),
		Instances: specs,
	}
	opts.Agents.configure(&cfg)
	node, err := actors.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("server: start node: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
		defer cancel()
		if serr := node.Stop(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("server: stop node: %w", serr))
		}
	}()
	if err := opts.Agents.subscribe(ctx, node); err != nil {
		return err
	}

	if opts.PipelinesDir != "" {
		keys, err := LoadPipelines(ctx, node, opts.PipelinesDir, opts.limits())
		if err != nil {
			return err
		}
		log.Info("pipelines loaded", zap.String("dir", opts.PipelinesDir), zap.Strings("keys", keys))
	}
	var ready atomic.Bool
	handler := api.New(api.Config{
		Node: node, Auth: verifier, MaxBodyBytes: opts.MaxBodyBytes, SSEHeartbeat: opts.SSEHeartbeat,
		Logger: log, Ready: ready.Load, Limits: opts.limits(), MetricsAuth: opts.MetricsAuth,
	})
	return serve(ctx, opts, log, handler, &ready, node.ID())
}

// serve runs the HTTP server until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, opts Options, log *zap.Logger, handler http.Handler, ready *atomic.Bool, nodeID string) error {
	ln, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: listen on %s: %w", opts.HTTPAddr, err)
	}
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler: handler, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout,
		BaseContext: func(net.Listener) context.Context { return baseCtx },
		ErrorLog:    zap.NewStdLog(log.Named("http")),
	}
	if err := ConfigureHTTP(srv); err != nil {
		return errors.Join(err, ln.Close())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	ready.Store(true)
	log.Info("dair serving", zap.String("http", ln.Addr().String()), zap.String("store", opts.StoreURL),
		zap.String("auth", opts.Auth), zap.String("node_id", nodeID))
	if opts.OnReady != nil {
		opts.OnReady(ln.Addr())
	}

	select {
	case err := <-served:
		return fmt.Errorf("server: serve http: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	ready.Store(false)
	sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	defer cancel()
	grace := time.AfterFunc(streamGrace, cancelBase)
	defer grace.Stop()
	if err := srv.Shutdown(sctx); err != nil {
		cerr := srv.Close()
		return errors.Join(fmt.Errorf("server: shutdown http: %w", err), cerr)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: serve http: %w", err)
	}
	return nil
}
