package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// get sends a bodyless request and returns the status, the Retry-After header and the error
// body (zero when the answer is not an error).
func rawCall(t *testing.T, method, url, body string) (int, string, httpapi.ErrorBody) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer closeBody(t, resp)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var eb httpapi.ErrorBody
	if resp.StatusCode >= 400 {
		require.NoError(t, json.Unmarshal(b, &eb), "body %s", b)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), eb
}

// requireStoreUnavailable checks a 503 store_unavailable answer that names no address.
func requireStoreUnavailable(t *testing.T, method, url, body, redisAddr string) {
	t.Helper()
	code, retry, eb := rawCall(t, method, url, body)
	require.Equal(t, http.StatusServiceUnavailable, code, "%s %s: %+v", method, url, eb)
	require.Equal(t, httpapi.CodeStoreUnavailable, eb.Error.Code, "%s %s", method, url)
	require.NotEmpty(t, retry, "%s %s: Retry-After", method, url)
	for _, leak := range []string{redisAddr, "127.0.0.1", "dial", "redisstore", "boltstore", "actors:"} {
		require.NotContains(t, eb.Error.Message, leak, "%s %s", method, url)
	}
}

// TestServer_storeUnavailable_redisKilled: while Redis is down, /readyz and store-backed calls
// answer 503 store_unavailable with Retry-After and no address; after a restart the node is
// ready again.
func TestServer_storeUnavailable_redisKilled(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	n := testkit.StartNode(t, testkit.NodeOptions{Backend: testkit.BackendRedis, Redis: r})
	srv := httptest.NewServer(api.New(api.Config{Node: n}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(threeStep))
	require.NoError(t, err)
	code, _, _ := rawCall(t, "GET", srv.URL+"/readyz", "")
	require.Equal(t, http.StatusOK, code)

	require.NoError(t, r.Kill())
	requireStoreUnavailable(t, "GET", srv.URL+"/v1/runs/run-x", "", r.Addr())
	requireStoreUnavailable(t, "GET", srv.URL+"/v1/runs", "", r.Addr())
	requireStoreUnavailable(t, "GET", srv.URL+"/v1/tenants", "", r.Addr())
	requireStoreUnavailable(t, "POST", srv.URL+"/v1/runs", `{"pipeline":"three","input":{"name":"x"}}`, r.Addr())
	requireStoreUnavailable(t, "GET", srv.URL+"/readyz", "", r.Addr())

	require.NoError(t, r.Restart())
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, func() bool {
		code, _, _ := rawCall(t, "GET", srv.URL+"/readyz", "")
		return code == http.StatusOK
	}, "/readyz answers 200 after Redis restarted")
	code, _, eb := rawCall(t, "GET", srv.URL+"/v1/runs/run-x", "")
	require.Equal(t, http.StatusNotFound, code, "%+v", eb)
}

// TestServer_storeUnavailable_boltClosed: a closed bbolt file answers 503 store_unavailable.
func TestServer_storeUnavailable_boltClosed(t *testing.T) {
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	require.NoError(t, err)
	n, err := actors.Start(context.Background(), actors.Config{NodeID: "closed", Store: st})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Logf("stop node: %v", err)
		}
	})
	srv := httptest.NewServer(api.New(api.Config{Node: n}))
	defer srv.Close()
	require.NoError(t, st.Close())
	requireStoreUnavailable(t, "GET", srv.URL+"/v1/runs/run-x", "", "dair.db")
	requireStoreUnavailable(t, "GET", srv.URL+"/readyz", "", "dair.db")
}

// TestServer_errorMessages_noInternals: answers name what was asked for, never an internal
// package.
func TestServer_errorMessages_noInternals(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	f.call("PUT", "/v1/tenants/frozen", `{"isolation_mode":"shared"}`, http.StatusOK, nil)
	f.call("POST", "/v1/tenants/frozen/suspend", "", http.StatusOK, nil)
	tests := []struct {
		method, path, body string
		status             int
		msg                string // "" => only checked for internals
	}{
		{"GET", "/v1/runs/run-nope", "", 404, `api: run "run-nope" not found`},
		{"POST", "/v1/runs/run-nope/cancel", "", 404, `api: run "run-nope" not found`},
		{"GET", "/v1/executions/nope/ledger", "", 404, `api: execution "nope" not found`},
		{"POST", "/v1/runs", `{"pipeline":"nope"}`, 404, `api: pipeline "nope" not found`},
		{"GET", "/v1/pipelines/nope", "", 404, `api: pipeline "nope" not found`},
		{"POST", "/v1/instances/nope/pause", "", 404, `api: instance "nope" not found`},
		{"POST", "/v1/runs", `{"pipeline":"three","tenant_id":"frozen"}`, 423, ""},
		{"POST", "/v1/runs", `{"pipeline":"three","tenant_id":"bad tenant!"}`, 400, ""},
		{"PUT", "/v1/tenants/acme", `{"isolation_mode":"galactic"}`, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			eb := f.callErr(tt.method, tt.path, tt.body, tt.status, "")
			if tt.msg != "" {
				require.Equal(t, tt.msg, eb.Error.Message)
			}
			for _, pkg := range []string{"actors:", "boltstore:", "redisstore:", "store:", "tenancy:"} {
				require.NotContains(t, eb.Error.Message, pkg)
			}
		})
	}
}

// TestServer_submitWhileStopping checks that a submit reaching a stopping node answers 503
// node_stopping with Retry-After, not 500 internal.
func TestServer_submitWhileStopping(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	require.NoError(t, f.node.Stop(context.Background()))
	code, retry, eb := rawCall(t, "POST", f.srv.URL+"/v1/runs", `{"pipeline":"three","input":{}}`)
	require.Equal(t, http.StatusServiceUnavailable, code, "%+v", eb)
	require.Equal(t, httpapi.CodeNodeStopping, eb.Error.Code)
	require.NotEmpty(t, retry)
}

// TestServer_events_streamOutlivesAStoreOutage: an event stream whose store goes away stays
// open (it says so in a comment) and goes on to the run's terminal event once the store is
// back; it used to end cleanly, without one, as if the run had finished.
func TestServer_events_streamOutlivesAStoreOutage(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
	n := testkit.StartNode(t, testkit.NodeOptions{Backend: testkit.BackendRedis, Redis: r})
	srv := httptest.NewServer(api.New(api.Config{Node: n, SSEPoll: 50 * time.Millisecond}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(slowSteps))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "slow", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	require.NoError(t, err)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/runs/"+run.SharedRunId+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer closeBody(t, resp)
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	next := func(what string, want func(string) bool) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %s; it sent:\n%s", what, strings.Join(seen, "\n"))
				}
				seen = append(seen, l)
				if want(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s; the stream sent:\n%s", what, strings.Join(seen, "\n"))
			}
		}
	}
	next("first event", func(l string) bool { return strings.HasPrefix(l, "event: ") })
	require.NoError(t, r.Kill())
	next("word of the outage", func(l string) bool { return strings.HasPrefix(l, ": store unavailable") })
	require.NoError(t, r.Restart())
	next("the terminal event", func(l string) bool { return l == "event: "+messages.KindRunSucceeded })
}
