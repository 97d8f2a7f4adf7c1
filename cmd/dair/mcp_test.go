package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/client"
	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

var mcpTestSecret = []byte("mcp-cmd-test-secret-0123456789")

// mcpNode starts an in-process node with HS256 auth behind an HTTP test server, stores the
// hello pipeline and returns the server URL.
func mcpNode(t *testing.T) string {
	t.Helper()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	n, err := actors.Start(context.Background(), actors.Config{NodeID: "mcp-cmd-test", Store: st, PumpInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Stop(context.Background())) })
	v, err := auth.NewHS256(mcpTestSecret)
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(api.Config{Node: n, Auth: v, SSEPoll: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.New(srv.URL, mcpToken(t, "ops", auth.RoleAdmin)).PutPipeline(ctx, "hello", []byte(helloPipeline))
	require.NoError(t, err)
	return srv.URL
}

func mcpToken(t *testing.T, tenant string, roles ...string) string {
	t.Helper()
	tok, err := auth.MintHS256(mcpTestSecret, auth.Claims{TenantID: tenant, Roles: roles, ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	return tok
}

// mcpStdio runs `dair mcp` with args as a child and connects an MCP client to its stdio.
func mcpStdio(t *testing.T, args ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(dairBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "DAIR_SERVER=", "DAIR_TOKEN=")
	cmd.Stderr = logs
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "dair-cmd-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	require.NoError(t, err, "stderr:\n%s", logs.String())
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Logf("close mcp session: %v; stderr:\n%s", err, logs.String())
		}
	})
	return cs, logs
}

// mcpCall calls a tool and returns the result; tool errors are results, not errors.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	return res
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpWaitRun polls get_run until the run is final.
func mcpWaitRun(t *testing.T, cs *mcp.ClientSession, id string) api.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res := mcpCall(t, cs, mcpserver.ToolGetRun, map[string]any{"shared_run_id": id})
		require.False(t, res.IsError, mcpText(res))
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var run api.Run
		require.NoError(t, json.Unmarshal(b, &run))
		if messages.IsTerminalRun(run.Status) {
			return run
		}
		require.True(t, time.Now().Before(deadline), "run %s not final: %+v", id, run)
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
}

func TestDair_MCP_stdio(t *testing.T) {
	url := mcpNode(t)
	acmeTok := mcpToken(t, "acme", auth.RoleTenant)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := client.New(url, acmeTok).Submit(ctx, api.SubmitRequest{Pipeline: "hello", Input: json.RawMessage(`{"name":"ada"}`)})
	require.NoError(t, err)

	cs, logs := mcpStdio(t, "--server", url, "--token", acmeTok)
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		require.NotNil(t, tl.InputSchema, tl.Name)
	}
	require.ElementsMatch(t, mcpserver.ToolNames(), names)

	run := mcpWaitRun(t, cs, sub.SharedRunID)
	require.Equal(t, messages.RunSucceeded, run.Status, "stderr:\n%s", logs.String())
	require.Equal(t, "acme", run.TenantID)

	res := mcpCall(t, cs, mcpserver.ToolDrainSharedQueue, map[string]any{})
	require.True(t, res.IsError, "a tenant token may not drain the shared queue")
	require.Contains(t, mcpText(res), "HTTP 403")

	other, _ := mcpStdio(t, "--server", url, "--token", mcpToken(t, "globex", auth.RoleTenant))
	res = mcpCall(t, other, mcpserver.ToolGetRun, map[string]any{"shared_run_id": sub.SharedRunID})
	require.True(t, res.IsError, "another tenant's run is refused")
	require.Contains(t, mcpText(res), "HTTP 404", "another tenant's run answers like an unknown one")
}

func TestDair_MCP_http(t *testing.T) {
	url := mcpNode(t)
	addr := testkit.FreeAddr(t)
	logs := &syncBuffer{}
	cmd := exec.Command(dairBin, "mcp", "--server", url, "--http", addr, "--auth", "jwt", "--log-level", "info")
	cmd.Env = append(os.Environ(), "DAIR_SERVER=", "DAIR_TOKEN=")
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("kill mcp: %v", err)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	endpoint := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(endpoint, "application/json", nil)
		if err == nil {
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "--auth jwt refuses a request without a token")
			break
		}
		require.True(t, time.Now().Before(deadline), "mcp --http not listening: %v\n%s", err, logs.String())
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}

	tok := mcpToken(t, "acme", auth.RoleTenant)
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
		return http.DefaultTransport.RoundTrip(r)
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "dair-cmd-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err, logs.String())
	t.Cleanup(func() { require.NoError(t, cs.Close()) })
	res := mcpCall(t, cs, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "hello", "input": map[string]any{"name": "h"}, "wait": true})
	require.False(t, res.IsError, mcpText(res))
	require.Contains(t, mcpText(res), "succeeded")
	require.NotContains(t, logs.String(), "ERROR", logs.String())
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDair_MCP_usage(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown auth", []string{"mcp", "--http", "127.0.0.1:0", "--auth", "basic"}, "unknown auth mode"},
		{"jwt over stdio", []string{"mcp", "--auth", "jwt"}, "needs --http"},
		{"key file without jwt", []string{"mcp", "--http", "127.0.0.1:0", "--jwt-secret-file", "/x"}, "need --auth jwt"},
		{"exposed fallback token", []string{"mcp", "--http", "0.0.0.0:0", "--token", "t"}, "not loopback"},
		{"bad address", []string{"mcp", "--http", "nonsense"}, "http address"},
		{"bad log level", []string{"mcp", "--log-level", "loud"}, "level"},
		{"extra argument", []string{"mcp", "x"}, "takes 0 argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dair(t, tc.args...)
			require.Equal(t, exitUsage, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.wantErr)
			require.Empty(t, r.stdout)
		})
	}
}
