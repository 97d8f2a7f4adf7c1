package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dairuntime/dair/httpapi"
)

// TestInvokeError: a runtime host's refusal of an invocation gets the answer a local submit's
// refusal gets, one row per gRPC code the host sends (internal/server's submitStatus).
func TestInvokeError(t *testing.T) {
	for _, tt := range []struct {
		code       codes.Code
		msg        string
		status     int
		errCode    string
		retryAfter string
	}{
		{codes.NotFound, "actors: unknown pipeline", http.StatusNotFound, httpapi.CodeUnknownPipeline, ""},
		{codes.InvalidArgument, "actors: bad input: input is not JSON", http.StatusBadRequest, httpapi.CodeBadRequest, ""},
		{codes.PermissionDenied, "tenant t2 may not invoke", http.StatusForbidden, httpapi.CodeForbidden, ""},
		{codes.FailedPrecondition, "actors: tenant suspended: t1", http.StatusLocked, httpapi.CodeTenantSuspended, ""},
		{codes.ResourceExhausted, "actors: tenant queue full: tenant t1 has 2 queued runs (max_queued_runs 2); retry later",
			http.StatusTooManyRequests, httpapi.CodeTenantQueueFull, "1"},
		{codes.Internal, "boom", http.StatusInternalServerError, httpapi.CodeInternal, ""},
	} {
		t.Run(tt.code.String(), func(t *testing.T) {
			s := &server{log: zap.NewNop()}
			w := httptest.NewRecorder()
			s.fail(w, httptest.NewRequest("POST", "/v1/invoke", nil), invokeError(status.Error(tt.code, tt.msg)))
			var body httpapi.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if w.Code != tt.status || body.Error.Code != tt.errCode {
				t.Fatalf("answer = %d %s (%q), want %d %s", w.Code, body.Error.Code, body.Error.Message, tt.status, tt.errCode)
			}
			if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Fatalf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
		})
	}
}
