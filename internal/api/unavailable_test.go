package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
)

func TestUnavailable(t *testing.T) {
	srv := httptest.NewServer(api.Unavailable("rejoining", "node is rejoining"))
	defer srv.Close()
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/healthz", http.StatusOK, ""},
		{"GET", "/readyz", http.StatusServiceUnavailable, "rejoining"},
		{"POST", "/v1/runs", http.StatusServiceUnavailable, "rejoining"},
		{"GET", "/v1/cluster/members", http.StatusServiceUnavailable, "rejoining"},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.code == "" {
				return
			}
			var body httpapi.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != tt.code || body.Error.Message == "" {
				t.Fatalf("error body = %+v", body)
			}
		})
	}
}
