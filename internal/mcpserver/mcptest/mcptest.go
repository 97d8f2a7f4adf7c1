package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// Timeouts of the helpers.
const (
	// callTimeout bounds one tool call.
	callTimeout = 20 * time.Second
	// connectTimeout bounds an MCP session's initialization and a pipeline upload.
	connectTimeout = 10 * time.Second
	// waitRunTimeout bounds WaitRun.
	waitRunTimeout = 20 * time.Second
	// waitRunPoll is WaitRun's poll interval.
	waitRunPoll = 20 * time.Millisecond
)

// API is an in-process dair node (embedded store) behind a real HTTP API that verifies HS256
// tokens signed with its secret. It is stopped with t.Cleanup.
type API struct {
	// URL is the HTTP API's base URL.
	URL string
	// Node is the node behind the API.
	Node   *actors.Node
	secret []byte
}

// StartAPI starts a node named nodeID through testkit.StartNode (pump tick 10ms, the node's
// default heartbeat and recovery ticks) and serves its API with HS256 auth on secret.
func StartAPI(t testing.TB, nodeID string, secret []byte) *API {
	t.Helper()
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{
		NodeID: nodeID, PumpInterval: 10 * time.Millisecond, HeartbeatInterval: time.Second, RecoveryInterval: time.Second,
	}})
	v, err := auth.NewHS256(secret)
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(api.Config{Node: n, Auth: v, SSEPoll: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return &API{URL: srv.URL, Node: n, secret: secret}
}

// Token returns an HS256 token of tenant with roles, valid for an hour.
func (a *API) Token(t testing.TB, tenant string, roles ...string) string {
	t.Helper()
	tok, err := auth.MintHS256(a.secret, auth.Claims{TenantID: tenant, Roles: roles, ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	return tok
}

// PutPipeline stores a pipeline definition (YAML) under key, as an admin.
func (a *API) PutPipeline(t testing.TB, key, src string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	_, err := client.New(a.URL, a.Token(t, "ops", auth.RoleAdmin)).PutPipeline(ctx, key, []byte(src))
	require.NoError(t, err)
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

// ConnectHTTP opens an MCP client session over streamable HTTP to url, sending token (none
// when empty) with every request. The session is closed with t.Cleanup.
func ConnectHTTP(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearerTransport{token: token, base: http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcp-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cs.Close()) })
	return cs
}

// Call calls a tool with a bounded context and requires a result; tool errors are results
// (IsError), not failures.
func Call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "tool %s", name)
	return res
}

// Text returns the text contents of res joined by newlines.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// CallOK calls a tool, requires success with a text summary and decodes its structured
// content into out (when not nil).
func CallOK(t testing.TB, cs *mcp.ClientSession, name string, args, out any) *mcp.CallToolResult {
	t.Helper()
	res := Call(t, cs, name, args)
	require.False(t, res.IsError, "tool %s failed: %s", name, Text(res))
	require.NotEmpty(t, Text(res), "tool %s: text summary", name)
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, out), "tool %s: structured content %s", name, b)
	}
	return res
}

// WaitRun polls the get_run tool until the run is final and returns it; it fails the test
// after 20 seconds.
func WaitRun(t testing.TB, cs *mcp.ClientSession, id string) httpapi.Run {
	t.Helper()
	deadline := time.Now().Add(waitRunTimeout)
	for {
		var run httpapi.Run
		CallOK(t, cs, mcpserver.ToolGetRun, map[string]any{"shared_run_id": id}, &run)
		if messages.IsTerminalRun(run.Status) {
			return run
		}
		require.True(t, time.Now().Before(deadline), "run %s not final in time: %+v", id, run)
		tm := time.NewTimer(waitRunPoll)
		<-tm.C
	}
}
