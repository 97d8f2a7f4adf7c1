package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/step"
)

// seen is what the test server observed of one request.
type seen struct {
	method, path, idem, ctype, custom string
	body                              string
}

// echoServer answers like a small REST API and reports each request on the returned channel.
func echoServer(t *testing.T) (*httptest.Server, <-chan seen) {
	t.Helper()
	ch := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ch <- seen{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"),
			r.Header.Get("X-Custom"), string(b)}
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Add("X-Multi", "first")
			w.Header().Add("X-Multi", "second")
			if _, err := io.WriteString(w, `{"ok":true,"n":3}`); err != nil {
				t.Errorf("write: %v", err)
			}
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			if _, err := io.WriteString(w, "hello"); err != nil {
				t.Errorf("write: %v", err)
			}
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			if _, err := io.WriteString(w, strings.Repeat("x", 100)); err != nil {
				t.Errorf("write: %v", err)
			}
		case "/bigchunked":
			for range 10 {
				if _, err := io.WriteString(w, strings.Repeat("y", 10)); err != nil {
					return
				}
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
			}
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		default:
			code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
			if err != nil {
				http.NotFound(w, r)
				return
			}
			http.Error(w, "status page", code)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestHTTP_Run_success(t *testing.T) {
	srv, ch := echoServer(t)
	h := HTTP(Options{})
	cases := []struct {
		name      string
		with      map[string]any
		wantSeen  seen
		wantBody  string
		wantJSON  any
		hasJSON   bool
		wantMulti string
	}{
		{
			name:      "get json",
			with:      map[string]any{"url": srv.URL + "/json"},
			wantSeen:  seen{method: "GET", path: "/json", idem: "exec-1/s1"},
			wantBody:  `{"ok":true,"n":3}`,
			wantJSON:  map[string]any{"ok": true, "n": 3.0},
			hasJSON:   true,
			wantMulti: "first",
		},
		{
			name: "post map body as json",
			with: map[string]any{"method": "post", "url": srv.URL + "/text",
				"body": map[string]any{"a": 1}, "headers": map[string]any{"X-Custom": 7}},
			wantSeen: seen{method: "POST", path: "/text", idem: "exec-1/s1", ctype: "application/json",
				custom: "7", body: `{"a":1}`},
			wantBody: "hello",
		},
		{
			name: "put list body",
			with: map[string]any{"method": "PUT", "url": srv.URL + "/text", "body": []any{1, "x"}},
			wantSeen: seen{method: "PUT", path: "/text", idem: "exec-1/s1", ctype: "application/json",
				body: `[1,"x"]`},
			wantBody: "hello",
		},
		{
			name: "string body keeps content type",
			with: map[string]any{"method": "POST", "url": srv.URL + "/text", "body": "raw",
				"headers": map[string]string{"Content-Type": "text/csv"}},
			wantSeen: seen{method: "POST", path: "/text", idem: "exec-1/s1", ctype: "text/csv", body: "raw"},
			wantBody: "hello",
		},
		{
			name: "map body keeps explicit content type",
			with: map[string]any{"method": "POST", "url": srv.URL + "/text", "body": map[string]any{},
				"headers": map[string]any{"content-type": "application/vnd.x+json"}},
			wantSeen: seen{method: "POST", path: "/text", idem: "exec-1/s1", ctype: "application/vnd.x+json",
				body: `{}`},
			wantBody: "hello",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(context.Background(), h, 1, tc.with)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			got := <-ch
			if got != tc.wantSeen {
				t.Fatalf("server saw %+v, want %+v", got, tc.wantSeen)
			}
			out, ok := res.Output.(map[string]any)
			if !ok {
				t.Fatalf("output type %T", res.Output)
			}
			if out["status"] != 200 || out["body"] != tc.wantBody {
				t.Fatalf("output = %#v", out)
			}
			js, has := out["json"]
			if has != tc.hasJSON || !reflect.DeepEqual(js, tc.wantJSON) {
				t.Fatalf("json = %#v (present %v), want %#v", js, has, tc.wantJSON)
			}
			hdrs, ok := out["headers"].(map[string]any)
			if !ok {
				t.Fatalf("headers type %T", out["headers"])
			}
			if tc.wantMulti != "" && hdrs["X-Multi"] != tc.wantMulti {
				t.Fatalf("X-Multi = %v, want first value %q", hdrs["X-Multi"], tc.wantMulti)
			}
			if _, err := json.Marshal(res.Output); err != nil {
				t.Fatalf("output does not marshal: %v", err)
			}
		})
	}
}

func TestHTTP_Run_errors(t *testing.T) {
	srv, _ := echoServer(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	h := HTTP(Options{MaxBodyBytes: 50})
	cases := []struct {
		name      string
		with      map[string]any
		timeout   time.Duration
		is        error
		permanent bool
		mention   []string
	}{
		{"503 retryable", map[string]any{"url": srv.URL + "/status/503"}, 0, ErrStatus, false,
			[]string{"GET", srv.URL + "/status/503", "503"}},
		{"500 retryable", map[string]any{"method": "DELETE", "url": srv.URL + "/status/500"}, 0, ErrStatus, false,
			[]string{"DELETE", "500"}},
		{"429 retryable", map[string]any{"url": srv.URL + "/status/429"}, 0, ErrStatus, false, []string{"429"}},
		{"408 retryable", map[string]any{"url": srv.URL + "/status/408"}, 0, ErrStatus, false, []string{"408"}},
		{"404 permanent", map[string]any{"url": srv.URL + "/status/404"}, 0, ErrStatus, true,
			[]string{"GET", "/status/404", "404", "status page"}},
		{"400 permanent", map[string]any{"method": "POST", "url": srv.URL + "/status/400"}, 0, ErrStatus, true,
			[]string{"POST", "400"}},
		{"body over limit", map[string]any{"url": srv.URL + "/big"}, 0, ErrBodyTooLarge, true, []string{"/big"}},
		{"chunked body over limit", map[string]any{"url": srv.URL + "/bigchunked"}, 0, ErrBodyTooLarge, true, nil},
		{"ctx timeout", map[string]any{"url": srv.URL + "/slow"}, 50 * time.Millisecond,
			context.DeadlineExceeded, false, []string{"GET", "/slow"}},
		{"connection refused", map[string]any{"url": closedURL}, 0, nil, false, []string{"GET", closedURL}},
		{"missing url", map[string]any{}, 0, ErrInvalidArgument, true, nil},
		{"ftp url", map[string]any{"url": "ftp://127.0.0.1/x"}, 0, ErrInvalidArgument, true, []string{"ftp"}},
		{"relative url", map[string]any{"url": "/x"}, 0, ErrInvalidArgument, true, nil},
		{"url not string", map[string]any{"url": 3}, 0, ErrInvalidArgument, true, nil},
		{"headers not map", map[string]any{"url": srv.URL, "headers": "x"}, 0, ErrInvalidArgument, true, nil},
		{"bad header name", map[string]any{"url": srv.URL, "headers": map[string]any{"a b": "x"}}, 0,
			ErrInvalidArgument, true, nil},
		{"bad header value", map[string]any{"url": srv.URL, "headers": map[string]any{"A": "x\r\nB: y"}}, 0,
			ErrInvalidArgument, true, nil},
		{"bad method", map[string]any{"method": "GE T", "url": srv.URL}, 0, ErrInvalidArgument, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			_, err := run(ctx, h, 1, tc.with)
			if err == nil {
				t.Fatal("want error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if step.IsPermanent(err) != tc.permanent {
				t.Fatalf("permanent = %v, want %v (err %v)", step.IsPermanent(err), tc.permanent, err)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("err %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestHTTP_Run_idempotencyKeyStableAcrossAttempts(t *testing.T) {
	srv, ch := echoServer(t)
	h := HTTP(Options{HTTPClient: srv.Client()})
	for attempt := 1; attempt <= 3; attempt++ {
		if _, err := run(context.Background(), h, attempt, map[string]any{"url": srv.URL + "/text"}); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if got := (<-ch).idem; got != "exec-1/s1" {
			t.Fatalf("attempt %d: Idempotency-Key = %q", attempt, got)
		}
	}
}
