package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/mcpserver/mcptest"
)

func TestHTTPHandler_CallTool_pipelineDiscovery(t *testing.T) {
	n := startNode(t)
	url := serveMCP(t, mcpserver.Config{Server: n.URL})
	acme := mcptest.ConnectHTTP(t, url, n.Token(t, "acme", auth.RoleTenant))
	var l httpapi.PipelineList
	res := mcptest.CallOK(t, acme, mcpserver.ToolListPipelines, map[string]any{}, &l)
	require.Len(t, l.Pipelines, 1, mcptest.Text(res))
	require.Equal(t, "greet", l.Pipelines[0].Key)
	require.Equal(t, 3, l.Pipelines[0].Steps)
	var p httpapi.Pipeline
	res = mcptest.CallOK(t, acme, mcpserver.ToolGetPipeline, map[string]any{"key": "greet"}, &p)
	require.Contains(t, p.Source, "hello {{ .input.name }}")
	require.Contains(t, mcptest.Text(res), "pipeline greet: 3 step(s)")
	miss := mcptest.Call(t, acme, mcpserver.ToolGetPipeline, map[string]any{"key": "nosuch"})
	require.True(t, miss.IsError)
	require.Contains(t, mcptest.Text(miss), "HTTP 404")
}

func TestHTTPHandler_CallTool_listRunsLimitAndSummaries(t *testing.T) {
	n := startNode(t)
	url := serveMCP(t, mcpserver.Config{Server: n.URL})
	acme := mcptest.ConnectHTTP(t, url, n.Token(t, "acme", auth.RoleTenant))
	var ids []string
	for i := 0; i < 3; i++ {
		var sub httpapi.SubmitResponse
		mcptest.CallOK(t, acme, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "greet",
			"input": map[string]any{"name": strings.Repeat("x", 1000)}}, &sub)
		ids = append(ids, sub.SharedRunID)
		mcptest.WaitRun(t, acme, sub.SharedRunID)
	}
	var l mcpserver.RunSummaryList
	res := mcptest.CallOK(t, acme, mcpserver.ToolListRuns, map[string]any{"limit": 2}, &l)
	require.Len(t, l.Runs, 2)
	require.Equal(t, ids[2], l.Runs[0].SharedRunID, "newest first")
	require.NotContains(t, mcptest.Text(res), strings.Repeat("x", 100))
	raw := mcptest.Call(t, acme, mcpserver.ToolListRuns, map[string]any{})
	sc := raw.StructuredContent.(map[string]any)["runs"].([]any)
	require.Len(t, sc, 3)
	for _, r := range sc {
		require.NotContains(t, r, "input")
		require.NotContains(t, r, "output")
		require.NotContains(t, r, "steps")
	}
	mcptest.CallOK(t, acme, mcpserver.ToolListRuns, map[string]any{"pipeline": "nosuch"}, &l)
	require.Empty(t, l.Runs)
	bad := mcptest.Call(t, acme, mcpserver.ToolListRuns, map[string]any{"limit": 5000})
	require.True(t, bad.IsError)
	require.Contains(t, mcptest.Text(bad), mcpserver.CodeBadArgument)
}
