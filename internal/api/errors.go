package api

import (
	"context"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
)

// fail answers err with the status and code the contract assigns to it; unknown errors are a
// logged 500.
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
		s.writeError(w, http.StatusRequestEntityTooLarge, httpapi.CodeRequestTooLarge, "api: "+err.Error())
	case errors.Is(err, dag.ErrInvalid):
		s.writeError(w, http.StatusBadRequest, httpapi.CodeInvalidPipeline, err.Error())
	case errors.Is(err, tenancy.ErrInvalidSettings):
		s.writeError(w, http.StatusBadRequest, httpapi.CodeInvalidSettings, err.Error())
	case errors.Is(err, actors.ErrBadInput):
		s.writeError(w, http.StatusBadRequest, httpapi.CodeBadRequest, err.Error())
	case errors.Is(err, actors.ErrUnknownPipeline):
		s.writeError(w, http.StatusNotFound, httpapi.CodeUnknownPipeline, err.Error())
	case errors.Is(err, store.ErrNotFound):
		s.writeError(w, http.StatusNotFound, httpapi.CodeNotFound, err.Error())
	case errors.Is(err, actors.ErrTenantSuspended):
		s.writeError(w, http.StatusLocked, httpapi.CodeTenantSuspended, err.Error())
	case errors.Is(err, actors.ErrNoCapacity):
		s.writeError(w, http.StatusServiceUnavailable, httpapi.CodeNoCapacity, err.Error())
	case errors.Is(err, actors.ErrNotRunning):
		s.writeError(w, http.StatusConflict, httpapi.CodeNotRunning, err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		s.writeError(w, http.StatusRequestTimeout, "request_cancelled", "api: request cancelled")
	default:
		s.log.Error("api: request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		s.writeError(w, http.StatusInternalServerError, httpapi.CodeInternal, err.Error())
	}
}
