package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/netaddr"
)

// shutdownTimeout bounds the graceful shutdown of ListenAndServe.
const shutdownTimeout = 5 * time.Second

// ListenAndServe serves HTTPHandler(cfg) on addr until ctx ends, then shuts down gracefully
// (bounded by a few seconds) and returns nil. onReady, when not nil, is called with the bound
// address once the listener is open.
//
// It refuses (ErrInvalidConfig) an invalid cfg, and a non-loopback addr when cfg.Auth is
// AuthNone: that would lend the server's fallback token, or a node that runs without auth on
// loopback (dair dev), to anyone who can reach the port. It blocks; other errors are the
// listener's.
func ListenAndServe(ctx context.Context, addr string, cfg Config, onReady func(net.Addr)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: http address %q: %v", ErrInvalidConfig, addr, err)
	}
	if cfg.Auth == AuthNone && !netaddr.IsLoopback(host) {
		return fmt.Errorf("%w: http address %q is not loopback; with auth none the MCP server serves on "+
			"loopback only (use 127.0.0.1, or --auth jwt to require a bearer token on every request)", ErrInvalidConfig, addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("mcpserver: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: HTTPHandler(cfg), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	cfg.Logger.Info("mcp server listening", zap.String("addr", ln.Addr().String()),
		zap.String("node", cfg.Server), zap.String("auth", cfg.Auth))
	if onReady != nil {
		onReady(ln.Addr())
	}
	select {
	case err := <-served:
		return fmt.Errorf("mcpserver: serve http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return errors.Join(fmt.Errorf("mcpserver: shutdown http: %w", err), srv.Close())
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("mcpserver: serve http: %w", err)
	}
	return nil
}
