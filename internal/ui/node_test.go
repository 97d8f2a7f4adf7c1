package ui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/testkit"
)

var testSecret = []byte("ui-test-secret-0123456789abcdef")

// testNode is a real node in process with the API (and the dashboard) on a loopback server.
type testNode struct {
	t    *testing.T
	node *actors.Node
	url  string
}

func newNode(t *testing.T, withAuth bool) *testNode {
	t.Helper()
	n := testkit.StartNode(t, testkit.NodeOptions{})
	cfg := api.Config{Node: n, SSEPoll: 50 * time.Millisecond}
	if withAuth {
		v, err := auth.NewHS256(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = v
	}
	srv := httptest.NewServer(api.New(cfg))
	t.Cleanup(srv.Close)
	return &testNode{t: t, node: n, url: srv.URL}
}

// token mints an HS256 token for tenant with roles.
func (f *testNode) token(tenant string, roles ...string) string {
	f.t.Helper()
	tok, err := auth.MintHS256(testSecret, auth.Claims{TenantID: tenant, Subject: "user-" + tenant, Roles: roles,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		f.t.Fatalf("mint: %v", err)
	}
	return tok
}

// call sends an API request, requires status want and decodes the answer into out.
func (f *testNode) call(method, path, token, body string, want int, out any) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.url+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer closeBody(f.t, resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != want {
		f.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("decode %s: %v", b, err)
		}
	}
}

// submit submits a run and returns its id.
func (f *testNode) submit(token, body string) string {
	f.t.Helper()
	var sr httpapi.SubmitResponse
	f.call("POST", "/v1/runs", token, body, http.StatusAccepted, &sr)
	return sr.SharedRunID
}

// waitFinal polls the run until it is final and returns it.
func (f *testNode) waitFinal(token, id string) httpapi.Run {
	f.t.Helper()
	var run httpapi.Run
	testkit.Eventually(f.t, 20*time.Second, 20*time.Millisecond, func() bool {
		f.call("GET", "/v1/runs/"+id, token, "", http.StatusOK, &run)
		return run.Status == "succeeded" || run.Status == "failed" || run.Status == "cancelled"
	}, "run %s to finish", id)
	return run
}

// fanPipeline: fetch (an http step held by a gate) → left and flaky (fails once, retried) →
// join. It exercises fan-out, fan-in, a retry and a step the test holds in "running".
func fanPipeline(gateURL string) string {
	return `key: fan
description: fan-out and fan-in with a retry
steps:
  - id: fetch
    uses: http
    with: {method: GET, url: "` + gateURL + `"}
  - id: left
    uses: echo
    needs: [fetch]
    with: {value: "left saw {{ .steps.fetch.output.status }}"}
  - id: flaky
    uses: fail
    needs: [fetch]
    retry: {max_attempts: 3, backoff: 20ms}
    with: {times: 1, message: "injected"}
  - id: join
    uses: echo
    needs: [left, flaky]
    with: {value: done}
`
}

const helloPipeline = `key: hello
steps:
  - id: greet
    uses: echo
    with: {value: "hello {{ .input.name }}"}
  - id: shout
    uses: echo
    needs: [greet]
    with: {value: "{{ .steps.greet.output }}!"}
`
