package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/messages"
)

// TestHandlers_tenantHeaders: the http and llm.chat handlers send the run's tenant context as
// x-tenant-id, x-org-id and x-user-id, over any `with.headers` value of the same name.
func TestHandlers_tenantHeaders(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write([]byte(`{"model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`)); err != nil {
			t.Errorf("write: %v", err)
		}
	}))
	defer srv.Close()
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme", OrgId: "org-1", UserId: "u-9"}
	cases := []struct {
		name string
		h    step.Handler
		with map[string]any
	}{
		{"http", HTTP(Options{HTTPClient: srv.Client()}), map[string]any{"url": srv.URL, "headers": map[string]any{"x-tenant-id": "forged"}}},
		{"llm.chat", LLMChat(Options{HTTPClient: srv.Client()}), map[string]any{"base_url": srv.URL, "model": "m", "prompt": "hello"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &step.Request{ExecutionID: "e", StepID: "s", TenantID: "acme", Attempt: 1, IdempotencyKey: "e/s", With: tc.with, Snapshot: snap}
			if _, err := tc.h.Run(context.Background(), req); err != nil {
				t.Fatalf("run: %v", err)
			}
			h := <-got
			for k, v := range map[string]string{"X-Tenant-Id": "acme", "X-Org-Id": "org-1", "X-User-Id": "u-9"} {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
		})
	}
}
