package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/jsonvalid"
	"github.com/dairuntime/dair/internal/ui"
	"github.com/dairuntime/dair/messages"
)

// Config configures the HTTP API handler. The zero value of each field means its default.
type Config struct {
	// Node is the engine the API drives. Required: New panics without it.
	Node *actors.Node
	// Auth verifies bearer tokens. Nil means auth none: every caller is an admin acting for the
	// tenant named in the request (tenant_id in the body or query, default "default").
	Auth auth.Verifier
	// MaxBodyBytes bounds request bodies; larger ones get 413 "request_too_large".
	// Default 1 MiB.
	MaxBodyBytes int64
	// SSEHeartbeat is the interval of ": ping" comment lines on event streams. Default 15s.
	SSEHeartbeat time.Duration
	// SSEPoll is how often an event stream re-reads the durable ledger when no in-process
	// notification arrives (the run may execute in another process). Default 500ms.
	SSEPoll time.Duration
	// Logger receives server errors and recovered panics. Default: no logging.
	Logger *zap.Logger
	// Ready reports readiness for GET /readyz. Default: always ready. Besides it, /readyz
	// answers 503 store_unavailable while the node's store does not answer a cached probe.
	Ready func() bool
	// Cluster is the node's membership, listed by GET /v1/cluster/members. Default nil: the
	// endpoint answers 404 (a single node).
	Cluster *cluster.Membership
	// MetricsAuth puts GET /metrics behind the bearer token: the operator role is required
	// (the series name every tenant's instances). It needs Auth. Default false: open.
	MetricsAuth bool
	// Limits bound the pipelines PUT /v1/pipelines/{key} accepts (a 400 invalid_pipeline
	// beyond them). Zero fields mean dag's defaults (1,000 steps, 512 KiB, 64 KiB templates).
	Limits dag.Limits
}

// DefaultTenant is the tenant of requests without one when auth is off.
const DefaultTenant = "default"

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.SSEHeartbeat <= 0 {
		c.SSEHeartbeat = 15 * time.Second
	}
	if c.SSEPoll <= 0 {
		c.SSEPoll = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Ready == nil {
		c.Ready = func() bool { return true }
	}
	return c
}

// server holds the handlers' shared state. It is immutable after New (probe is goroutine-safe).
type server struct {
	cfg   Config
	node  *actors.Node
	log   *zap.Logger
	probe *storeProbe
}

// New returns the HTTP handler of the dair API (CONTRACT.md, "HTTP API"). It panics when
// cfg.Node is nil (a wiring bug). The handler is goroutine-safe; handlers never panic on bad
// input, and a panic anyway is recovered into a 500 answer.
func New(cfg Config) http.Handler {
	if cfg.Node == nil {
		panic("api: Config.Node is required")
	}
	cfg = cfg.withDefaults()
	s := &server{cfg: cfg, node: cfg.Node, log: cfg.Logger, probe: newStoreProbe(cfg.Node.Store())}
	mux := http.NewServeMux()
	v1 := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.authenticate(h)) }

	v1("POST /v1/runs", s.submitRun)
	v1("GET /v1/runs", s.listRuns)
	v1("GET /v1/runs/{id}", s.getRun)
	v1("POST /v1/runs/{id}/cancel", s.emptyBody(s.controlRun(messages.OpCancelRun)))
	v1("POST /v1/runs/{id}/pause", s.emptyBody(s.controlRun(messages.OpPauseRun)))
	v1("POST /v1/runs/{id}/resume", s.emptyBody(s.controlRun(messages.OpResumeRun)))
	v1("GET /v1/runs/{id}/events", s.runEvents)
	v1("POST /v1/sessions/{session_id}/invoke", s.invoke)

	v1("GET /v1/instances", s.listInstances)
	v1("POST /v1/instances/{id}/pause", s.emptyBody(s.controlInstance(messages.OpPauseQueue)))
	v1("POST /v1/instances/{id}/resume", s.emptyBody(s.controlInstance(messages.OpResumeQueue)))
	v1("POST /v1/instances/{id}/drain", s.emptyBody(s.controlInstance(messages.OpDrainQueue)))
	v1("POST /v1/queue/drain", s.emptyBody(s.drainQueue))

	v1("GET /v1/tenants", s.listTenants)
	v1("GET /v1/tenants/{id}", s.getTenant)
	v1("PUT /v1/tenants/{id}", s.putTenant)
	v1("POST /v1/tenants/{id}/suspend", s.emptyBody(s.suspendTenant(true)))
	v1("POST /v1/tenants/{id}/resume", s.emptyBody(s.suspendTenant(false)))
	v1("GET /v1/tenants/{id}/usage", s.usage)

	v1("GET /v1/executions/{id}/ledger", s.ledger)
	v1("GET /v1/executions/{id}/trace", s.trace)
	v1("POST /v1/executions/{id}/replay", s.emptyBody(s.replay))

	v1("GET /v1/cluster/members", s.listMembers)
	s.registerAgentRoutes(v1)

	v1("PUT /v1/pipelines/{key}", s.putPipeline)
	v1("GET /v1/pipelines", s.listPipelines)
	v1("GET /v1/pipelines/{key}", s.getPipeline)
	v1("POST /v1/pipelines/{key}/check", s.checkPipeline)
	v1("GET /v1/whoami", s.whoami)

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		s.writeJSON(w, http.StatusOK, httpapi.Health{Status: "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics(promhttp.HandlerFor(cfg.Node.Metrics().Registry, promhttp.HandlerOpts{})))
	// The dashboard's assets are public (its data calls carry the token); browsers asking
	// for / or /ui are redirected to /ui/.
	for _, p := range []string{"GET /ui/", "GET /ui", "GET /{$}"} {
		mux.Handle(p, ui.Handler())
	}
	noRoute := func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed,
				fmt.Sprintf("api: %s %s: the route takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		s.writeError(w, http.StatusNotFound, httpapi.CodeNotFound, fmt.Sprintf("api: no route for %s %s", r.Method, r.URL.Path))
	}
	authedNoRoute := s.authenticate(noRoute)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" {
			authedNoRoute.ServeHTTP(w, r) // 401 before 404 and 405 under the API (docs/api.md)
			return
		}
		noRoute(w, r)
	})
	// /v1/topics itself is no route (the mux would redirect it to the {topic...} subtree).
	mux.Handle("/v1/topics", authedNoRoute)
	return s.recover(s.guardOrigin(s.limitBody(s.canonicalPath(mux))))
}

// canonicalPath refuses (400) an API path with an empty, "." or ".." segment as sent (a key or
// topic left empty, a client that did not escape a dot key as %2E): the mux would answer a
// redirect to the cleaned path, which a POST client does not follow and which names another
// resource.
func (s *server) canonicalPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); strings.HasPrefix(p, "/v1/") {
			for _, seg := range strings.Split(strings.TrimSuffix(p[1:], "/"), "/") {
				if seg == "" || seg == "." || seg == ".." {
					// After authentication, as every 400 (docs/api.md).
					s.authenticate(func(w http.ResponseWriter, _ *http.Request) {
						s.writeError(w, http.StatusBadRequest, httpapi.CodeBadRequest, fmt.Sprintf(
							"api: %s: the path has an empty, \".\" or \"..\" segment (escape a key or topic \".\" as %%2E)", p))
					}).ServeHTTP(w, r)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// guardOrigin, with auth none (every caller is an admin), refuses what a web page the
// operator visits could send: a request from another origin (its Origin header names another
// host than the request's: a form or a fetch without preflight would otherwise submit, cancel
// or suspend) and a request for a host name other than localhost (DNS rebinding: a name the
// attacker points at 127.0.0.1 makes the page same-origin). IP addresses and localhost pass;
// clients that are not browsers send no Origin. With tokens on, a page cannot attach one.
func (s *server) guardOrigin(next http.Handler) http.Handler {
	if s.cfg.Auth != nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackOrIPHost(r.Host) {
			s.writeError(w, http.StatusForbidden, httpapi.CodeForbidden, fmt.Sprintf(
				"api: with auth none the API answers requests for localhost or an IP address only, not %q (a guard against DNS rebinding; turn auth on to serve a name)", r.Host))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			s.writeError(w, http.StatusForbidden, httpapi.CodeForbidden, fmt.Sprintf(
				"api: with auth none a request from another origin (%q) is refused", o))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackOrIPHost reports whether host (a Host header, port optional) is localhost or an IP
// address.
func loopbackOrIPHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return h == "" || strings.EqualFold(h, "localhost") || net.ParseIP(h) != nil
}

// sameOrigin reports whether origin (an Origin header) names host (host[:port]).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}

// allowedMethods returns the methods of the routes of mux that r's path has under another
// method (the catch-all "/" aside): r is then a 405, not a 404.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	if p := r.URL.Path + "/"; strings.HasPrefix(p, topicsPrefix) && !strings.HasSuffix(r.URL.Path, messagesSuffix) {
		return nil // the topics pattern matches any path below it; only .../messages is a route
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// metrics serves h, behind the token and the operator role when MetricsAuth is set.
func (s *server) metrics(h http.Handler) http.Handler {
	if !s.cfg.MetricsAuth || s.cfg.Auth == nil {
		return h
	}
	return s.authenticate(func(w http.ResponseWriter, r *http.Request) {
		if err := requireRole(r, auth.RoleOperator); err != nil {
			s.fail(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Unavailable returns the handler a node serves while it has no API to offer (it is restarting
// under a new cluster member id): GET /healthz answers 200, every other request 503 with code.
func Unavailable(code, message string) http.Handler {
	s := &server{log: zap.NewNop()}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			s.writeJSON(w, http.StatusOK, httpapi.Health{Status: "ok"})
			return
		}
		s.writeError(w, http.StatusServiceUnavailable, code, message)
	})
}

// statusWriter remembers whether the header was written, so the recover middleware does not
// write a second one. Unwrap lets http.ResponseController reach Flush and deadlines.
type statusWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recover turns a handler panic into a logged 500 answer.
func (s *server) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("api: handler panic", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.Any("panic", v), zap.Stack("stack"))
			if !sw.wrote {
				s.writeError(sw, http.StatusInternalServerError, httpapi.CodeInternal, "api: internal error")
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// limitBody rejects bodies declared larger than MaxBodyBytes at once and caps the rest.
func (s *server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.writeError(w, http.StatusRequestEntityTooLarge, httpapi.CodeRequestTooLarge,
				fmt.Sprintf("api: request body is larger than %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// emptyBody wraps the handler of a request that takes no body: an empty body or an empty JSON
// object passes; malformed JSON or any field is a 400, like the bodies of other requests.
func (s *server) emptyBody(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var none struct{}
		if err := decodeJSON(r, &none, true); err != nil {
			s.fail(w, r, err)
			return
		}
		next(w, r)
	}
}

// writeJSON writes v as the JSON answer with status code.
func (s *server) writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("api: encode answer", zap.Error(err))
		code = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"api: encode answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if _, err := w.Write(append(b, '\n')); err != nil {
		s.log.Debug("api: write answer", zap.Error(err))
	}
}

// writeError writes an ErrorBody.
func (s *server) writeError(w http.ResponseWriter, code int, errCode, msg string) {
	s.writeJSON(w, code, httpapi.ErrorBody{Error: httpapi.ErrorDetail{Code: errCode, Message: msg}})
}

// decodeJSON decodes the request body into v, rejecting unknown fields, trailing data, and
// text that is not valid UTF-8 or holds an unpaired surrogate escape (which encoding/json
// would turn into U+FFFD, so that different idempotency keys could decode as one). An empty
// body is allowed when allowEmpty is set (v keeps its zero value).
func decodeJSON(r *http.Request, v any, allowEmpty bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return &requestError{msg: "api: read body: " + err.Error()}
	}
	if err := jsonvalid.CheckText(body); err != nil {
		return &requestError{msg: textProblem(body, err)}
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		// encoding/json leaves v as it is for null: the body would read as {}.
		return &requestError{msg: "api: malformed json: the body: want an object, got null"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			if allowEmpty {
				return nil
			}
			return &requestError{msg: "api: request body is empty"}
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return &requestError{msg: "api: malformed json: " + jsonProblem(err)}
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return &requestError{msg: "api: malformed json: trailing data after the object"}
	}
	if err := jsonvalid.Fields(body, v); err != nil {
		return &requestError{msg: "api: malformed json: " + err.Error()}
	}
	return nil
}

// textProblem words err, body's CheckText failure, naming the top-level field that holds it
// (its offset then counts from the field's value), as the input's own check does.
func textProblem(body []byte, err error) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if ferr := jsonvalid.CheckText(fields[k]); ferr != nil {
				return "api: " + k + ": " + ferr.Error()
			}
		}
	}
	return "api: malformed json: " + err.Error()
}

// plainWords drops the package names that the messages of the packages below the API carry.
var plainWords = strings.NewReplacer("agents: invalid tenant: tenancy: invalid tenant_id", "invalid tenant_id",
	"tenancy: invalid", "invalid", "agents: ", "")

// plain is err's message in the API's words, without package names.
func plain(err error) string { return plainWords.Replace(err.Error()) }

// jsonProblem says what is wrong with a request body in the API's terms: a value of the wrong
// type names the JSON field and the kind of value expected, not the Go type behind it.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := "the body"
		if te.Field != "" {
			where = "field " + strconv.Quote(te.Field)
		}
		return fmt.Sprintf("%s: want %s, got %s", where, jsonKind(te.Type), te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another value"
}

// requestError is a 400 answer with a precise message.
type requestError struct {
	code string
	msg  string
}

func (e *requestError) Error() string { return e.msg }

// badRequest returns a 400 requestError.
func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// httpError is an error with its own status and code (authorization failures).
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func forbidden(format string, args ...any) error {
	return &httpError{status: http.StatusForbidden, code: httpapi.CodeForbidden, msg: fmt.Sprintf(format, args...)}
}
