package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
)

// FuzzHandlers feeds random methods, paths and bodies to the handler and requires that it never
// panics and answers bad input with a 4xx status and a JSON error body (checkFuzzAnswer).
func FuzzHandlers(f *testing.F) {
	n := startNode(f)
	h := api.New(api.Config{Node: n, MaxBodyBytes: 64 << 10, SSEPoll: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n.PutPipeline(ctx, []byte(threeStep)); err != nil {
		f.Fatal(err)
	}
	seeds := []struct{ method, path, body string }{
		{"POST", "/v1/runs", `{"pipeline":"three","input":{"name":"f"}}`},
		{"POST", "/v1/runs", `{"pipeline":`},
		{"POST", "/v1/runs", `{"pipeline":"three","input":"\u0000"}`},
		{"POST", "/v1/runs", `{"pipeline":"three","tenant_id":"../x"}`},
		{"POST", "/v1/runs", `[1,2,3]`},
		{"GET", "/v1/runs?status=queued&limit=-1", ""},
		{"GET", "/v1/runs/%00/events", ""},
		{"POST", "/v1/runs/x/pause", "zz"},
		{"PUT", "/v1/pipelines/k", "key: k\nsteps: [{id: a, uses: echo, with: {value: '{{'}}]"},
		{"PUT", "/v1/pipelines/k", `{"key":"k","steps":[{"id":"a","uses":"echo","needs":["a"]}]}`},
		{"PUT", "/v1/pipelines/k", "&a [*a]"},
		{"PUT", "/v1/tenants/t", `{"isolation_mode":"hybrid","max_runtime_instances":-5}`},
		{"PUT", "/v1/tenants/%20", `{}`},
		{"POST", "/v1/sessions/s/invoke", `{"pipeline":"three"}`},
		{"POST", "/v1/executions/x/replay", ""},
		{"DELETE", "/v1/runs", ""},
		{"GET", "/v1/instances?tenant_id=\xff", ""},
		{"POST", "/v1/instances/%2e%2e/drain", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") {
			return
		}
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		req, err := http.NewRequestWithContext(rctx, method, "http://dair.test"+u.RequestURI(), strings.NewReader(body))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkFuzzAnswer(t, method, u, body, rec)
	})
}

// checkFuzzAnswer requires a 2xx answer or a 4xx answer with a JSON error body; a 3xx is
// allowed only as the router's redirect of an unclean path (such as "//" or "/./").
func checkFuzzAnswer(t *testing.T, method string, u *url.URL, body string, rec *httptest.ResponseRecorder) {
	t.Helper()
	switch {
	case rec.Code >= 200 && rec.Code < 300:
	case rec.Code >= 300 && rec.Code < 400:
		if path.Clean(u.Path) == u.Path && u.Path != "" {
			t.Fatalf("%s %s %q = %d redirect of a clean path", method, u, body, rec.Code)
		}
	case rec.Code >= 400 && rec.Code < 500:
		if method == http.MethodHead {
			return
		}
		var eb httpapi.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s %s %q = %d with body %q, want a JSON error body (%v)", method, u, body, rec.Code, rec.Body.String(), err)
		}
	default:
		t.Fatalf("%s %s %q = %d %s, want 2xx or 4xx", method, u, body, rec.Code, rec.Body.String())
	}
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead:
		return true
	}
	return false
}
