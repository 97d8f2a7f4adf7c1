package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

const echoPipeline = `key: greet
steps:
  - id: hello
    uses: echo
    with: {value: "hello {{ .input.name }}"}
  - id: shout
    uses: echo
    needs: [hello]
    with: {value: "{{ .steps.hello.output }}!"}
  - id: bye
    uses: echo
    needs: [hello]
    with: {value: "bye"}
`

var testSecret = []byte("mcp-test-secret-0123456789")

// node is a real dair node behind a real HTTP API with HS256 auth.
type node struct {
	url string
}

// startNode starts a node on a bolt store in t.TempDir(), serves its API and stores the echo
// pipeline.
func startNode(t *testing.T) *node {
	t.Helper()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	n, err := actors.Start(context.Background(), actors.Config{NodeID: "mcp-test", Store: st, PumpInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Stop(context.Background())) })
	v, err := auth.NewHS256(testSecret)
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(api.Config{Node: n, Auth: v, SSEPoll: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.New(srv.URL, mint(t, "ops", auth.RoleAdmin)).PutPipeline(ctx, "greet", []byte(echoPipeline))
	require.NoError(t, err)
	return &node{url: srv.URL}
}

// mint returns an HS256 token of tenant with roles.
func mint(t *testing.T, tenant string, roles ...string) string {
	t.Helper()
	tok, err := auth.MintHS256(testSecret, auth.Claims{TenantID: tenant, Roles: roles, ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	return tok
}

// serveMCP serves HTTPHandler(cfg) on a loopback test server and returns its URL.
func serveMCP(t *testing.T, cfg mcpserver.Config) string {
	t.Helper()
	srv := httptest.NewServer(mcpserver.HTTPHandler(cfg))
	t.Cleanup(srv.Close)
	return srv.URL
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connectHTTP opens an MCP client session over streamable HTTP, sending token (none when
// empty) with every request.
func connectHTTP(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearerTransport{token: token, base: http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcp-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cs.Close()) })
	return cs
}

// callTool calls a tool with a bounded context and requires a result (tool errors included).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "tool %s", name)
	return res
}

// text returns the concatenated text content of res.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// callOK calls a tool, requires success and decodes its structured content into out.
func callOK(t *testing.T, cs *mcp.ClientSession, name string, args, out any) *mcp.CallToolResult {
	t.Helper()
	res := callTool(t, cs, name, args)
	require.False(t, res.IsError, "tool %s failed: %s", name, text(res))
	require.NotEmpty(t, text(res), "tool %s: text summary", name)
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, out), "tool %s: structured content %s", name, b)
	}
	return res
}

// waitRun polls get_run until the run is final and returns it.
func waitRun(t *testing.T, cs *mcp.ClientSession, id string) httpapi.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var run httpapi.Run
		callOK(t, cs, mcpserver.ToolGetRun, map[string]any{"shared_run_id": id}, &run)
		if messages.IsTerminalRun(run.Status) {
			return run
		}
		require.True(t, time.Now().Before(deadline), "run %s not final in time: %+v", id, run)
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
}
