package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/testkit"
)

const threeStep = testkit.ThreeStepPipeline

const slowSteps = `
key: slow
steps:
  - id: a
    uses: sleep
    with: {duration: 150ms}
  - id: b
    uses: sleep
    needs: [a]
    with: {duration: 150ms}
  - id: c
    uses: sleep
    needs: [b]
    with: {duration: 150ms}
`

const longStep = `
key: long
steps:
  - id: wait
    uses: sleep
    with: {duration: 3s}
  - id: after
    uses: echo
    needs: [wait]
    with: {value: done}
`

var testSecret = []byte("api-test-secret-0123456789")

// fixture is a real node behind a real HTTP server.
type fixture struct {
	t    *testing.T
	node *actors.Node
	srv  *httptest.Server
	// token is sent as the bearer token when non-empty.
	token string
}

// startNode starts the API tests' node: testkit's in-process node on the embedded store, with
// a 10ms pump tick and the node's default heartbeat and recovery ticks.
func startNode(t testing.TB) *actors.Node {
	t.Helper()
	return testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{
		NodeID: "api-test", PumpInterval: 10 * time.Millisecond, HeartbeatInterval: time.Second, RecoveryInterval: time.Second,
	}})
}

func newFixture(t *testing.T, withAuth bool, mod func(*api.Config)) *fixture {
	t.Helper()
	n := startNode(t)
	cfg := api.Config{Node: n, SSEPoll: 50 * time.Millisecond}
	if withAuth {
		v, err := auth.NewHS256(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = v
	}
	if mod != nil {
		mod(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg))
	t.Cleanup(srv.Close)
	return &fixture{t: t, node: n, srv: srv}
}

// as returns a copy of f sending token.
func (f *fixture) as(token string) *fixture {
	c := *f
	c.token = token
	return &c
}

func mintToken(t *testing.T, tenant string, roles ...string) string {
	t.Helper()
	tok, err := auth.MintHS256(testSecret, auth.Claims{TenantID: tenant, Subject: "user-" + tenant, Roles: roles,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	return tok
}

func rawToken(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do sends a request and returns the status and body.
func (f *fixture) do(method, path string, body string, hdr ...string) (int, []byte) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer closeBody(f.t, resp)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b
}

func closeBody(t *testing.T, resp *http.Response) {
	if err := resp.Body.Close(); err != nil {
		t.Logf("close body: %v", err)
	}
}

// call sends a request, requires status want and decodes the answer into out (if non-nil).
func (f *fixture) call(method, path, body string, want int, out any) []byte {
	f.t.Helper()
	code, b := f.do(method, path, body)
	if code != want {
		f.t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("decode %s: %v", b, err)
		}
	}
	return b
}

// callErr sends a request and requires status want with error code code (if non-empty).
func (f *fixture) callErr(method, path, body string, want int, code string) httpapi.ErrorBody {
	f.t.Helper()
	var eb httpapi.ErrorBody
	f.call(method, path, body, want, &eb)
	if eb.Error.Message == "" || (code != "" && eb.Error.Code != code) {
		f.t.Fatalf("%s %s error body = %+v, want code %q", method, path, eb, code)
	}
	return eb
}

func (f *fixture) putPipeline(src string) {
	f.t.Helper()
	key := strings.TrimSpace(strings.SplitN(strings.SplitN(src, "key:", 2)[1], "\n", 2)[0])
	f.call("PUT", "/v1/pipelines/"+key, src, http.StatusOK, nil)
}

func (f *fixture) submit(body string) httpapi.SubmitResponse {
	f.t.Helper()
	var sr httpapi.SubmitResponse
	f.call("POST", "/v1/runs", body, http.StatusAccepted, &sr)
	if sr.SharedRunID == "" {
		f.t.Fatal("empty shared_run_id")
	}
	return sr
}

// waitRun polls GET /v1/runs/{id} until cond holds.
func (f *fixture) waitRun(id string, cond func(httpapi.Run) bool) httpapi.Run {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var run httpapi.Run
		f.call("GET", "/v1/runs/"+id, "", http.StatusOK, &run)
		if cond(run) {
			return run
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("run %s: condition not met; last %+v", id, run)
		}
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
}

func isFinal(r httpapi.Run) bool {
	return r.Status == "succeeded" || r.Status == "failed" || r.Status == "cancelled"
}

type sseEvent struct {
	ID   int64
	Kind string
	Data httpapi.LedgerEntry
}

// sseReader parses an event stream.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	br   *bufio.Reader
	// retry is the value of the stream's last `retry:` field.
	retry string
}

func (f *fixture) openStream(method, path, body string, hdr ...string) *sseReader {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		closeBody(f.t, resp)
		f.t.Fatalf("stream %s = %d %s (%v)", path, resp.StatusCode, b, err)
	}
	return &sseReader{t: f.t, resp: resp, br: bufio.NewReader(resp.Body)}
}

// next returns the next event, skipping comments; ok is false at the end of the stream.
func (s *sseReader) next() (sseEvent, bool) {
	s.t.Helper()
	var ev sseEvent
	have := false
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			if err == io.EOF && !have {
				return ev, false
			}
			s.t.Fatalf("read stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if have {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				s.t.Fatalf("bad id line %q", line)
			}
			ev.ID, have = id, true
		case strings.HasPrefix(line, "retry: "):
			s.retry = strings.TrimPrefix(line, "retry: ")
		case strings.HasPrefix(line, "event: "):
			ev.Kind, have = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data); err != nil {
				s.t.Fatalf("bad data line %q: %v", line, err)
			}
			have = true
		default:
			s.t.Fatalf("unexpected stream line %q", line)
		}
	}
}

func (s *sseReader) close() { closeBody(s.t, s.resp) }

// readAll reads events to the end of the stream.
func (s *sseReader) readAll() []sseEvent {
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}
