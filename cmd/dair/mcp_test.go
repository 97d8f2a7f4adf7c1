package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/mcpserver/mcptest"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

var mcpTestSecret = []byte("mcp-cmd-test-secret-0123456789")

// mcpNode starts an in-process node with HS256 auth behind an HTTP test server and stores the
// hello pipeline.
func mcpNode(t *testing.T) *mcptest.API {
	t.Helper()
	n := mcptest.StartAPI(t, "mcp-cmd-test", mcpTestSecret)
	n.PutPipeline(t, "hello", helloPipeline)
	return n
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

func TestDair_MCP_stdio(t *testing.T) {
	n := mcpNode(t)
	url := n.URL
	acmeTok := n.Token(t, "acme", auth.RoleTenant)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := client.New(url, acmeTok).Submit(ctx, httpapi.SubmitRequest{Pipeline: "hello", Input: json.RawMessage(`{"name":"ada"}`)})
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

	run := mcptest.WaitRun(t, cs, sub.SharedRunID)
	require.Equal(t, messages.RunSucceeded, run.Status, "stderr:\n%s", logs.String())
	require.Equal(t, "acme", run.TenantID)

	res := mcptest.Call(t, cs, mcpserver.ToolDrainSharedQueue, map[string]any{})
	require.True(t, res.IsError, "a tenant token may not drain the shared queue")
	require.Contains(t, mcptest.Text(res), "HTTP 403")

	other, _ := mcpStdio(t, "--server", url, "--token", n.Token(t, "globex", auth.RoleTenant))
	res = mcptest.Call(t, other, mcpserver.ToolGetRun, map[string]any{"shared_run_id": sub.SharedRunID})
	require.True(t, res.IsError, "another tenant's run is refused")
	require.Contains(t, mcptest.Text(res), "HTTP 403", "another tenant's run is forbidden (CONTRACT.md)")
}

func TestDair_MCP_http(t *testing.T) {
	n := mcpNode(t)
	url := n.URL
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

	tok := n.Token(t, "acme", auth.RoleTenant)
	cs := mcptest.ConnectHTTP(t, endpoint, tok)
	res := mcptest.Call(t, cs, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "hello", "input": map[string]any{"name": "h"}, "wait": true})
	require.False(t, res.IsError, mcptest.Text(res))
	require.Contains(t, mcptest.Text(res), "succeeded")
	require.NotContains(t, logs.String(), "ERROR", logs.String())
}

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
		{"exposed without auth", []string{"mcp", "--http", "0.0.0.0:0"}, "not loopback"},
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
