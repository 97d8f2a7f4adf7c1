package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/internal/auth"
)

// Sentinel errors of package mcpserver.
var (
	// ErrMissingArgument is reported (as a tool error) by a tool called without one of its
	// required arguments, or with it empty.
	ErrMissingArgument = errors.New("mcpserver: missing argument")
	// ErrBadArgument is reported (as a tool error) by a tool called with an argument it cannot
	// use, such as an unknown isolation mode.
	ErrBadArgument = errors.New("mcpserver: bad argument")
	// ErrInvalidConfig is returned by ListenAndServe for a Config it cannot serve (an unknown
	// Auth mode, an unparsable address).
	ErrInvalidConfig = errors.New("mcpserver: invalid config")
)

// Auth modes of Config.Auth.
const (
	// AuthNone forwards the caller's bearer token when it sends one and otherwise Config.Token.
	AuthNone = "none"
	// AuthJWT requires a bearer token on every MCP HTTP request and never falls back to
	// Config.Token.
	AuthJWT = "jwt"
)

// DefaultServer is the node URL used when Config.Server is empty.
const DefaultServer = "http://127.0.0.1:8080"

// Config configures the MCP server. The zero value talks to DefaultServer without a token.
type Config struct {
	// Server is the base URL of the dair node whose HTTP API the tools call. Default
	// DefaultServer.
	Server string
	// Token is the bearer token sent to the node. Over stdio it is always used. Over HTTP it is
	// only a fallback for MCP requests that carry no Authorization header, and only when Auth
	// is AuthNone. Default: none.
	Token string
	// Version is reported to MCP clients as the server implementation version. Default "dev".
	Version string
	// Logger receives one debug line per tool call and the transport's errors. Default: no
	// logging. In stdio mode it must not write to stdout.
	Logger *zap.Logger
	// Auth is how HTTPHandler treats callers: AuthNone (default) or AuthJWT. It does not
	// affect stdio, where the process's Token is the caller's identity.
	Auth string
	// Verifier, when set with AuthJWT, makes HTTPHandler check each bearer token before
	// forwarding it and answer 401 for a bad one. The node verifies tokens either way; this
	// only refuses bad callers earlier. Default: nil (the node alone verifies).
	Verifier auth.Verifier
	// HTTPClient performs the requests to the node. Default: a client without an overall
	// timeout (per-call deadlines come from the MCP request's context).
	HTTPClient *http.Client
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	if c.Server == "" {
		c.Server = DefaultServer
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Auth == "" {
		c.Auth = AuthNone
	}
	return c
}

// Validate reports whether c can be served: Auth must be empty, AuthNone or AuthJWT. The error
// wraps ErrInvalidConfig.
func (c Config) Validate() error {
	switch c.Auth {
	case "", AuthNone, AuthJWT:
		return nil
	default:
		return fmt.Errorf("%w: unknown auth mode %q (want %s or %s)", ErrInvalidConfig, c.Auth, AuthNone, AuthJWT)
	}
}

// service holds what every tool handler needs. It is immutable after New and goroutine-safe.
type service struct {
	cfg Config
}

// New returns an MCP server exposing dair's control-plane tools (see the package doc) that
// call the node at cfg.Server.
//
// Over stdio (mcp.StdioTransport) every call carries cfg.Token. When the server is reached
// through HTTPHandler, each call forwards the Authorization header of its own MCP HTTP
// request instead. Node answers that are errors (401, 403, 404, 409, 423, ...) and transport
// failures become tool results with IsError set, never protocol errors. The returned server
// is goroutine-safe and may serve many sessions.
func New(cfg Config) *mcp.Server {
	cfg = cfg.withDefaults()
	s := mcp.NewServer(&mcp.Implementation{Name: "dair", Title: "dair runtime control plane", Version: cfg.Version},
		&mcp.ServerOptions{
			Instructions: "Tools of a dair node: submit and control pipeline runs, manage runtime instances and " +
				"tenant settings, read durable history (ledger, trace, replay), and message agents (list, send, publish). Authorization is the node's: " +
				"a tenant token sees only its tenant; operator or admin tokens are needed for instances, " +
				"tenants and the shared queue.",
			Logger: slog.New(zapslog.NewHandler(cfg.Logger.Named("mcp").Core())),
		})
	registerTools(s, &service{cfg: cfg})
	return s
}

// HTTPHandler returns an http.Handler serving the tools of New over MCP streamable HTTP.
//
// Authorization is the node's: the Authorization header of each MCP HTTP request is
// forwarded, as is, with every node call that request makes, so a caller can do exactly what
// its token allows on the HTTP API. With cfg.Auth AuthNone a request without the header uses
// cfg.Token (none when empty); with AuthJWT it is answered 401 and cfg.Token is never used,
// and with cfg.Verifier set a token that fails verification is answered 401 too. The handler
// is goroutine-safe.
func HTTPHandler(cfg Config) http.Handler {
	cfg = cfg.withDefaults()
	srv := New(cfg)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: slog.New(zapslog.NewHandler(cfg.Logger.Named("mcp-http").Core()))})
	if cfg.Auth != AuthJWT {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r.Header)
		if !ok || tok == "" {
			unauthorized(w, "missing bearer token")
			return
		}
		if cfg.Verifier != nil {
			if _, err := cfg.Verifier.Verify(tok); err != nil {
				unauthorized(w, err.Error())
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// unauthorized answers 401 with the API's error body.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer realm="dair"`)
	w.WriteHeader(http.StatusUnauthorized)
	body := fmt.Sprintf(`{"error":{"code":"unauthenticated","message":%q}}`, "mcpserver: "+msg)
	if _, err := w.Write([]byte(body)); err != nil {
		return // the client went away; nothing left to tell it
	}
}

// bearer returns the token of an "Authorization: Bearer T" header. ok reports whether an
// Authorization header was sent at all (a non-bearer one yields an empty token).
func bearer(h http.Header) (token string, ok bool) {
	v := strings.TrimSpace(h.Get("Authorization"))
	if v == "" {
		return "", false
	}
	const prefix = "bearer "
	if len(v) > len(prefix) && strings.EqualFold(v[:len(prefix)], prefix) {
		return strings.TrimSpace(v[len(prefix):]), true
	}
	return "", true
}

// client returns an API client carrying the caller's token: the MCP HTTP request's bearer
// token when it sent an Authorization header, otherwise cfg.Token unless auth is jwt.
func (s *service) client(req *mcp.CallToolRequest) *client.Client {
	token := s.cfg.Token
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		if t, ok := bearer(req.Extra.Header); ok {
			token = t
		} else if s.cfg.Auth == AuthJWT {
			token = ""
		}
	}
	c := client.New(s.cfg.Server, token)
	if s.cfg.HTTPClient != nil {
		c.HTTP = s.cfg.HTTPClient
	}
	return c
}

// RunStdio serves New(cfg) over stdin/stdout until the client disconnects or ctx ends. A
// line that is not a JSON-RPC message gets an error answer and the session goes on; at the
// end of stdin the requests read before it are answered first (stdioGuard). It blocks; the
// caller must not write to stdout meanwhile.
func RunStdio(ctx context.Context, cfg Config) error {
	if err := serveGuarded(ctx, New(cfg), os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcpserver: serve stdio: %w", err)
	}
	return nil
}
