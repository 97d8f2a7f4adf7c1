package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/tenancy"
)

// storeRetryAfter is the Retry-After (seconds) of a store_unavailable answer: about the
// readiness probe's refresh interval.
const storeRetryAfter = "2"

// msgStoreUnavailable is the message of every store_unavailable answer: it names no address.
const msgStoreUnavailable = "api: the store is unavailable; retry later"

// fail answers err with the status and code the contract assigns to it. Messages never carry
// internal package names or store addresses: sentinel errors get fixed messages, the rest
// (logged in full) a generic one.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		re  *requestError
		he  *httpError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &he):
		s.writeError(w, he.status, he.code, he.msg)
	case errors.As(err, &re):
		code := re.code
		if code == "" {
			code = httpapi.CodeBadRequest
		}
		s.writeError(w, http.StatusBadRequest, code, re.msg)
	case errors.As(err, &mbe):
		// Worded as limitBody's refusal of a declared length (http's own is "http: request body too large").
		s.writeError(w, http.StatusRequestEntityTooLarge, httpapi.CodeRequestTooLarge, fmt.Sprintf("api: request body is larger than %d bytes", mbe.Limit))
	case errors.Is(err, dag.ErrInvalid):
		// The validator's messages ("dag: step "a": cycle: ...") are its documented format.
		s.writeError(w, http.StatusBadRequest, httpapi.CodeInvalidPipeline, err.Error())
	case errors.Is(err, tenancy.ErrInvalidSettings):
		s.writeError(w, http.StatusBadRequest, httpapi.CodeInvalidSettings, publicMessage(err.Error()))
	case errors.Is(err, actors.ErrBadInput):
		s.writeError(w, http.StatusBadRequest, httpapi.CodeBadRequest, publicMessage(err.Error()))
	case errors.Is(err, actors.ErrUnknownPipeline):
		s.writeError(w, http.StatusNotFound, httpapi.CodeUnknownPipeline, "api: unknown pipeline")
	case errors.Is(err, store.ErrNotFound):
		s.writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "api: not found")
	case errors.Is(err, actors.ErrTenantSuspended):
		// Worded as the agent endpoints' refusal (requireActiveTenant): the wrapped error is
		// "actors: tenant suspended: ID".
		msg := publicMessage(err.Error())
		if id, ok := strings.CutPrefix(msg, "api: tenant suspended: "); ok {
			msg = fmt.Sprintf("api: tenant %q is suspended", id)
		}
		s.writeError(w, http.StatusLocked, httpapi.CodeTenantSuspended, msg)
	case errors.Is(err, actors.ErrTenantQueueFull):
		w.Header().Set("Retry-After", queueFullRetryAfter(err))
		s.writeError(w, http.StatusTooManyRequests, httpapi.CodeTenantQueueFull, publicMessage(err.Error()))
	case errors.Is(err, actors.ErrNoCapacity):
		s.writeError(w, http.StatusServiceUnavailable, httpapi.CodeNoCapacity, publicMessage(err.Error()))
	case errors.Is(err, actors.ErrStopped):
		w.Header().Set("Retry-After", storeRetryAfter)
		s.writeError(w, http.StatusServiceUnavailable, httpapi.CodeNodeStopping, "api: node is stopping; retry on another node")
	case errors.Is(err, actors.ErrNotRunning):
		s.writeError(w, http.StatusConflict, httpapi.CodeNotRunning, "api: run is not running")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		s.writeError(w, http.StatusRequestTimeout, "request_cancelled", "api: request cancelled")
	case StoreUnavailable(err):
		s.log.Warn("api: store unavailable", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		if s.probe != nil {
			s.probe.markDown()
		}
		s.storeUnavailable(w)
	default:
		s.log.Error("api: request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		s.writeError(w, http.StatusInternalServerError, httpapi.CodeInternal, "api: internal error")
	}
}

// storeUnavailable writes the 503 store_unavailable answer with Retry-After.
func (s *server) storeUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", storeRetryAfter)
	s.writeError(w, http.StatusServiceUnavailable, httpapi.CodeStoreUnavailable, msgStoreUnavailable)
}

// unavailableMarks are message fragments of store errors that arrive without a typed cause
// (errors formatted with %v on the way, go-redis client and pool errors).
var unavailableMarks = []string{
	"connection refused", "connection reset", "broken pipe", "i/o timeout", "use of closed network connection",
	"redis: client is closed", "redis: connection pool timeout", "database not open", "boltstore: closed",
}

// StoreUnavailable reports whether err says the store cannot be reached or used right now: a
// network error talking to Redis (refused, reset, timed out), a closed Redis client or pool
// timeout, or a closed bbolt file. Such errors answer 503 store_unavailable.
func StoreUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, boltstore.ErrClosed) {
		return true
	}
	msg := err.Error()
	for _, m := range unavailableMarks {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// internalPrefixes are the package names that wrapped errors start their segments with.
var internalPrefixes = map[string]bool{
	"actors": true, "boltstore": true, "redisstore": true, "store": true, "tenancy": true, "admission": true,
	"history": true, "hostmanager": true, "lifecycle": true, "providers": true, "local": true, "cluster": true,
	"step": true, "handlers": true, "ids": true, "workgroup": true, "server": true, "api": true, "auth": true, "controlplane": true,
}

// publicMessage removes internal package names from an error message ("actors: bad input:
// tenancy: ..." becomes "api: bad input: ...").
func publicMessage(msg string) string {
	parts := strings.Split(msg, ": ")
	kept := parts[:0]
	for _, p := range parts {
		if !internalPrefixes[p] {
			kept = append(kept, p)
		}
	}
	return "api: " + strings.Join(kept, ": ")
}

// notFound returns the 404 answer naming what was looked up: `api: run "X" not found`.
func notFound(kind, id string) error {
	return &httpError{status: http.StatusNotFound, code: httpapi.CodeNotFound, msg: fmt.Sprintf("api: %s %q not found", kind, id)}
}

// notFoundAs turns a store.ErrNotFound into notFound(kind, id) and returns other errors as
// they are.
func notFoundAs(err error, kind, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound(kind, id)
	}
	return err
}

// queueFullRetryAfter is the Retry-After (whole seconds, at least 1) of a full tenant queue.
func queueFullRetryAfter(err error) string {
	secs := 1
	var qf *controlplane.QueueFullError
	if errors.As(err, &qf) {
		secs = max(1, int(math.Ceil(qf.RetryAfter.Seconds())))
	}
	return strconv.Itoa(secs)
}
