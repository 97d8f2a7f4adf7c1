package ui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/ui"
)

func TestHandler_ServeHTTP(t *testing.T) {
	h := ui.Handler()
	tests := []struct {
		name, method, path, accept string
		status                     int
		ctype                      string // prefix
		location                   string
		body                       string // substring
	}{
		{"index", "GET", "/ui/", "", 200, "text/html", "", `<script type="module" src="js/main.js">`},
		{"index by name", "GET", "/ui/index.html", "", 200, "text/html", "", "dair dashboard"},
		{"module", "GET", "/ui/js/main.js", "", 200, "text/javascript", "", "import"},
		{"stylesheet", "GET", "/ui/app.css", "", 200, "text/css", "", ":root"},
		{"head", "HEAD", "/ui/", "", 200, "text/html", "", ""},
		{"unknown asset", "GET", "/ui/nope.js", "", 404, "application/json", "", `"not_found"`},
		{"no traversal", "GET", "/ui/../ui.go", "", 404, "application/json", "", `"not_found"`},
		{"root from a browser", "GET", "/", "text/html,application/xhtml+xml", 302, "", "/ui/", ""},
		{"ui without slash from a browser", "GET", "/ui", "text/html", 302, "", "/ui/", ""},
		{"root from an API client", "GET", "/", "application/json", 404, "application/json", "", `"not_found"`},
		{"post", "POST", "/ui/", "", 404, "application/json", "", `"not_found"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d (body %q)", rec.Code, tt.status, rec.Body.String())
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.ctype) {
				t.Errorf("Content-Type = %q, want %q…", ct, tt.ctype)
			}
			if loc := rec.Header().Get("Location"); loc != tt.location {
				t.Errorf("Location = %q, want %q", loc, tt.location)
			}
			if !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("body does not contain %q:\n%s", tt.body, rec.Body.String())
			}
			if tt.status == 404 {
				var eb struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != "not_found" || eb.Error.Message == "" {
					t.Errorf("404 body %q is not the API's error shape (%v)", rec.Body.String(), err)
				}
				if want := "api: no route for " + tt.method + " "; !strings.HasPrefix(eb.Error.Message, want) {
					t.Errorf("404 message %q does not start with %q", eb.Error.Message, want)
				}
			}
		})
	}
}

func TestHandler_ServeHTTP_headers(t *testing.T) {
	h := ui.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/", nil))
	hd := rec.Header()
	if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want same-origin only", csp)
	}
	if hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Cache-Control") != "no-cache" {
		t.Errorf("headers = %v", hd)
	}
	etag := hd.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest("GET", "/ui/", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("revalidation status = %d, want 304", rec.Code)
	}
}

// TestHandler_ServeHTTP_mounted checks the mount in the API: the page needs no token even
// with auth on, while the API still does, and API clients asking for / keep the JSON 404.
func TestHandler_ServeHTTP_mounted(t *testing.T) {
	f := newNode(t, true)
	get := func(path, accept, token string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("GET", f.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer closeBody(t, resp.Body)
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	if code, _, body := get("/ui/", "", ""); code != 200 || !strings.Contains(body, "dair dashboard") {
		t.Errorf("GET /ui/ without a token = %d %q", code, body)
	}
	if code, loc, _ := get("/", "text/html", ""); code != http.StatusFound || loc != "/ui/" {
		t.Errorf("GET / from a browser = %d %q, want 302 to /ui/", code, loc)
	}
	if code, _, body := get("/", "", ""); code != 404 || !strings.Contains(body, "not_found") {
		t.Errorf("GET / from a client = %d %q, want the JSON 404", code, body)
	}
	if code, _, _ := get("/v1/runs", "", ""); code != 401 {
		t.Errorf("GET /v1/runs without a token = %d, want 401", code)
	}
	if code, _, _ := get("/v1/runs", "", f.token("acme", "tenant")); code != 200 {
		t.Errorf("GET /v1/runs with a token = %d, want 200", code)
	}
}

func closeBody(t *testing.T, c io.Closer) {
	if err := c.Close(); err != nil {
		t.Logf("close body: %v", err)
	}
}
