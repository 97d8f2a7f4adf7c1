package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
)

// recorder is a fake API that records the last request and answers with a fixed status/body.
type recorder struct {
	mu     sync.Mutex // guards method, path, query, body, auth
	method string
	path   string
	query  string
	body   string
	auth   string
	status int
	answer string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	r.mu.Lock()
	r.method, r.path, r.query, r.body, r.auth = req.Method, req.URL.EscapedPath(), req.URL.RawQuery, string(b), req.Header.Get("Authorization")
	status, answer := r.status, r.answer
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if _, err := io.WriteString(w, answer); err != nil {
		return
	}
}

func TestClient_Endpoints_methodAndPath(t *testing.T) {
	rec := &recorder{status: http.StatusOK, answer: "{}"}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c := New(srv.URL+"/", "tok")
	ctx := context.Background()
	cases := []struct {
		name       string
		call       func() error
		method     string
		path       string
		query      string
		bodySubstr string
	}{
		{"submit", func() error {
			_, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "p", TenantID: "t", Input: json.RawMessage(`{"a":1}`)})
			return err
		}, http.MethodPost, "/v1/runs", "", `"input":{"a":1}`},
		{"get run", func() error { _, err := c.GetRun(ctx, "r/1"); return err }, http.MethodGet, "/v1/runs/r%2F1", "", ""},
		{"list runs", func() error { _, err := c.ListRuns(ctx, "acme", "failed"); return err }, http.MethodGet, "/v1/runs", "status=failed&tenant_id=acme", ""},
		{"cancel run", func() error { _, err := c.ControlRun(ctx, "r1", OpCancel); return err }, http.MethodPost, "/v1/runs/r1/cancel", "", ""},
		{"list instances", func() error { _, err := c.ListInstances(ctx, ""); return err }, http.MethodGet, "/v1/instances", "", ""},
		{"drain instance", func() error { _, err := c.ControlInstance(ctx, "i1", OpDrain); return err }, http.MethodPost, "/v1/instances/i1/drain", "", ""},
		{"put tenant", func() error {
			_, err := c.PutTenant(ctx, httpapi.Tenant{TenantID: "acme", IsolationMode: "hybrid"})
			return err
		}, http.MethodPut, "/v1/tenants/acme", "", `"isolation_mode":"hybrid"`},
		{"get tenant", func() error { _, err := c.GetTenant(ctx, "acme"); return err }, http.MethodGet, "/v1/tenants/acme", "", ""},
		{"list tenants", func() error { _, err := c.ListTenants(ctx); return err }, http.MethodGet, "/v1/tenants", "", ""},
		{"suspend tenant", func() error { _, err := c.ControlTenant(ctx, "acme", "suspend"); return err }, http.MethodPost, "/v1/tenants/acme/suspend", "", ""},
		{"ledger", func() error { _, err := c.Ledger(ctx, "e1"); return err }, http.MethodGet, "/v1/executions/e1/ledger", "", ""},
		{"trace", func() error { _, err := c.Trace(ctx, "e1"); return err }, http.MethodGet, "/v1/executions/e1/trace", "", ""},
		{"replay", func() error { _, err := c.Replay(ctx, "e1"); return err }, http.MethodPost, "/v1/executions/e1/replay", "", ""},
		{"put pipeline", func() error { _, err := c.PutPipeline(ctx, "k", []byte("key: k\n")); return err }, http.MethodPut, "/v1/pipelines/k", "", "key: k"},
		{"get pipeline", func() error { _, err := c.GetPipeline(ctx, "k"); return err }, http.MethodGet, "/v1/pipelines/k", "", ""},
		{"list pipelines", func() error { _, err := c.ListPipelines(ctx); return err }, http.MethodGet, "/v1/pipelines", "", ""},
		{"drain queue", func() error { _, err := c.DrainQueue(ctx); return err }, http.MethodPost, "/v1/queue/drain", "", ""},
		{"ready", func() error { return c.Ready(ctx) }, http.MethodGet, "/readyz", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.call())
			rec.mu.Lock()
			defer rec.mu.Unlock()
			require.Equal(t, tc.method, rec.method)
			require.Equal(t, tc.path, rec.path)
			require.Equal(t, tc.query, rec.query)
			require.Contains(t, rec.body, tc.bodySubstr)
			require.Equal(t, "Bearer tok", rec.auth)
		})
	}
}

func TestClient_GetRun_errors(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		answer   string
		wantCode string
		wantMsg  string
		wantBad  bool
	}{
		{"api error body", http.StatusNotFound, `{"error":{"code":"not_found","message":"no run x"}}`, "not_found", "no run x", false},
		{"plain text error", http.StatusBadGateway, "upstream down\n", "", "upstream down", false},
		{"empty error body", http.StatusServiceUnavailable, "", "", "Service Unavailable", false},
		{"bad 2xx json", http.StatusOK, "{not json", "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&recorder{status: tc.status, answer: tc.answer})
			defer srv.Close()
			_, err := New(srv.URL, "").GetRun(context.Background(), "x")
			require.Error(t, err)
			if tc.wantBad {
				require.ErrorIs(t, err, ErrBadResponse)
				return
			}
			var ce *Error
			require.True(t, errors.As(err, &ce), err)
			require.Equal(t, tc.status, ce.Status)
			require.Equal(t, tc.wantCode, ce.Code)
			require.Equal(t, tc.wantMsg, ce.Message)
			require.Contains(t, ce.Error(), fmt.Sprintf("HTTP %d", tc.status))
		})
	}
}

func TestClient_WaitReady_deadline(t *testing.T) {
	srv := httptest.NewServer(&recorder{status: http.StatusServiceUnavailable, answer: `{"status":"starting"}`})
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := New(srv.URL, "").WaitReady(ctx, 20*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
