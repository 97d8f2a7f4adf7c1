package mcpserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/mcpserver/mcptest"
	"github.com/dairuntime/dair/messages"
)

func TestHTTPHandler_ListTools_allWithSchemas(t *testing.T) {
	url := serveMCP(t, mcpserver.Config{Server: "http://127.0.0.1:1", Version: "v-test"})
	cs := mcptest.ConnectHTTP(t, url, "")
	require.Equal(t, "dair", cs.InitializeResult().ServerInfo.Name)
	require.Equal(t, "v-test", cs.InitializeResult().ServerInfo.Version)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	byName := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	require.Len(t, byName, 21)
	required := map[string][]string{
		mcpserver.ToolSubmitRun: {"pipeline"}, mcpserver.ToolGetRun: {"shared_run_id"},
		mcpserver.ToolCancelRun: {"shared_run_id"}, mcpserver.ToolPauseRun: {"shared_run_id"},
		mcpserver.ToolResumeRun: {"shared_run_id"}, mcpserver.ToolListRuns: nil, mcpserver.ToolListInstances: nil,
		mcpserver.ToolPauseInstance: {"runtime_instance_id"}, mcpserver.ToolResumeInstance: {"runtime_instance_id"},
		mcpserver.ToolDrainInstance: {"runtime_instance_id"}, mcpserver.ToolDrainSharedQueue: nil,
		mcpserver.ToolGetTenant: {"tenant_id"}, mcpserver.ToolPutTenant: {"tenant_id", "isolation_mode"},
		mcpserver.ToolGetLedger: {"execution_id"}, mcpserver.ToolGetTrace: {"execution_id"},
		mcpserver.ToolReplayExecution: {"execution_id"},
		mcpserver.ToolListAgents:      nil, mcpserver.ToolSendAgentMessage: {"agent", "message"},
		mcpserver.ToolPublishMessage: {"topic", "message"},
		mcpserver.ToolListPipelines:  nil, mcpserver.ToolGetPipeline: {"key"},
	}
	require.ElementsMatch(t, mcpserver.ToolNames(), func() []string {
		var names []string
		for n := range required {
			names = append(names, n)
		}
		return names
	}())
	for name, want := range required {
		t.Run(name, func(t *testing.T) {
			tl, ok := byName[name]
			require.True(t, ok, "tool %s missing", name)
			require.NotEmpty(t, tl.Description)
			schema, ok := tl.InputSchema.(map[string]any)
			require.True(t, ok, "input schema of %s: %T", name, tl.InputSchema)
			require.Equal(t, "object", schema["type"])
			var got []string
			if req, ok := schema["required"].([]any); ok {
				for _, r := range req {
					got = append(got, r.(string))
				}
			}
			require.ElementsMatch(t, want, got)
			props, _ := schema["properties"].(map[string]any)
			for _, r := range want {
				p, ok := props[r].(map[string]any)
				require.True(t, ok, "property %s of %s", r, name)
				require.NotEmpty(t, p["description"], "property %s of %s has a description", r, name)
			}
		})
	}
	sub := byName[mcpserver.ToolSubmitRun].InputSchema.(map[string]any)["properties"].(map[string]any)
	for _, p := range []string{"pipeline", "tenant_id", "input", "correlation_id", "idempotency_key", "wait"} {
		require.Contains(t, sub, p)
	}
}

func TestHTTPHandler_CallTool_tenantRunAndHistory(t *testing.T) {
	n := startNode(t)
	url := serveMCP(t, mcpserver.Config{Server: n.URL})
	acme := mcptest.ConnectHTTP(t, url, n.Token(t, "acme", auth.RoleTenant))

	var sub httpapi.SubmitResponse
	res := mcptest.CallOK(t, acme, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "greet", "input": map[string]any{"name": "ada"},
		"correlation_id": "corr-1"}, &sub)
	require.NotEmpty(t, sub.SharedRunID)
	require.Contains(t, mcptest.Text(res), sub.SharedRunID)

	run := mcptest.WaitRun(t, acme, sub.SharedRunID)
	require.Equal(t, messages.RunSucceeded, run.Status)
	require.Equal(t, "acme", run.TenantID, "the tenant comes from the forwarded token")
	require.Len(t, run.Steps, 3)
	require.NotEmpty(t, run.ExecutionID)

	var ledger httpapi.Ledger
	mcptest.CallOK(t, acme, mcpserver.ToolGetLedger, map[string]any{"execution_id": run.ExecutionID}, &ledger)
	kinds := map[string]int{}
	for _, e := range ledger.Entries {
		kinds[e.Kind]++
		require.Equal(t, sub.SharedRunID, e.SharedRunID)
	}
	require.Equal(t, 3, kinds[messages.KindStepSucceeded], "ledger kinds: %v", kinds)
	require.Equal(t, 1, kinds[messages.KindRunSucceeded], "ledger kinds: %v", kinds)
	require.Positive(t, kinds[messages.KindStepStarted])

	var trace httpapi.Trace
	mcptest.CallOK(t, acme, mcpserver.ToolGetTrace, map[string]any{"execution_id": run.ExecutionID}, &trace)
	require.NotEmpty(t, trace.Spans)
	var replay httpapi.Replay
	mcptest.CallOK(t, acme, mcpserver.ToolReplayExecution, map[string]any{"execution_id": run.ExecutionID}, &replay)
	require.False(t, replay.Diverged, "%+v", replay)

	var waited httpapi.Run
	res = mcptest.CallOK(t, acme, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "greet", "input": map[string]any{"name": "bo"},
		"wait": true}, &waited)
	require.Equal(t, messages.RunSucceeded, waited.Status, mcptest.Text(res))
	require.Contains(t, mcptest.Text(res), "3/3 steps succeeded")

	var list httpapi.RunList
	mcptest.CallOK(t, acme, mcpserver.ToolListRuns, map[string]any{"status": "succeeded"}, &list)
	require.Len(t, list.Runs, 2)
	never := mcptest.Call(t, acme, mcpserver.ToolGetTenant, map[string]any{"tenant_id": "acme"})
	require.True(t, never.IsError, "a tenant that was never put is not found: %s", mcptest.Text(never))
	require.Contains(t, mcptest.Text(never), "HTTP 404")
	admin := mcptest.ConnectHTTP(t, url, n.Token(t, "ops", auth.RoleAdmin))
	mcptest.CallOK(t, admin, mcpserver.ToolPutTenant, map[string]any{"tenant_id": "acme", "isolation_mode": "shared"}, nil)
	var ten httpapi.Tenant
	mcptest.CallOK(t, acme, mcpserver.ToolGetTenant, map[string]any{"tenant_id": "acme"}, &ten)
	require.Equal(t, messages.IsolationShared, ten.IsolationMode)
}

func TestHTTPHandler_CallTool_refused(t *testing.T) {
	n := startNode(t)
	url := serveMCP(t, mcpserver.Config{Server: n.URL})
	acme := mcptest.ConnectHTTP(t, url, n.Token(t, "acme", auth.RoleTenant))
	var sub httpapi.SubmitResponse
	mcptest.CallOK(t, acme, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "greet", "input": map[string]any{"name": "x"}}, &sub)
	run := mcptest.WaitRun(t, acme, sub.SharedRunID)

	anon := mcptest.ConnectHTTP(t, url, "")
	globex := mcptest.ConnectHTTP(t, url, n.Token(t, "globex", auth.RoleTenant))
	operator := mcptest.ConnectHTTP(t, url, n.Token(t, "ops", auth.RoleOperator))
	admin := mcptest.ConnectHTTP(t, url, n.Token(t, "ops", auth.RoleAdmin))
	garbage := mcptest.ConnectHTTP(t, url, "not-a-jwt")
	cases := []struct {
		name     string
		cs       *mcp.ClientSession
		tool     string
		args     map[string]any
		wantCode string
		wantText string
	}{
		{"no token", anon, mcpserver.ToolGetRun, map[string]any{"shared_run_id": sub.SharedRunID}, httpapi.CodeUnauthenticated, "HTTP 401"},
		{"bad token", garbage, mcpserver.ToolListRuns, map[string]any{}, httpapi.CodeUnauthenticated, "HTTP 401"},
		{"other tenant's run", globex, mcpserver.ToolGetRun, map[string]any{"shared_run_id": sub.SharedRunID}, httpapi.CodeForbidden, "HTTP 403"},
		{"other tenant's cancel", globex, mcpserver.ToolCancelRun, map[string]any{"shared_run_id": sub.SharedRunID}, httpapi.CodeForbidden, "HTTP 403"},
		{"other tenant's ledger", globex, mcpserver.ToolGetLedger, map[string]any{"execution_id": run.ExecutionID}, httpapi.CodeForbidden, "HTTP 403"},
		{"tenant drains shared queue", acme, mcpserver.ToolDrainSharedQueue, map[string]any{}, httpapi.CodeForbidden, "HTTP 403"},
		{"tenant lists instances", acme, mcpserver.ToolListInstances, map[string]any{}, httpapi.CodeForbidden, "HTTP 403"},
		{"tenant puts tenant", acme, mcpserver.ToolPutTenant, map[string]any{"tenant_id": "acme", "isolation_mode": "dedicated"}, httpapi.CodeForbidden, "HTTP 403"},
		{"unknown run", operator, mcpserver.ToolGetRun, map[string]any{"shared_run_id": "run-nope"}, httpapi.CodeNotFound, "HTTP 404"},
		{"empty run id", operator, mcpserver.ToolGetRun, map[string]any{"shared_run_id": " "}, mcpserver.CodeBadArgument, "shared_run_id"},
		{"bad isolation", admin, mcpserver.ToolPutTenant, map[string]any{"tenant_id": "x", "isolation_mode": "solo"}, mcpserver.CodeBadArgument, "solo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := mcptest.Call(t, tc.cs, tc.tool, tc.args)
			require.True(t, res.IsError, "want a tool error, got %s", mcptest.Text(res))
			require.Contains(t, mcptest.Text(res), tc.wantText)
			require.Contains(t, mcptest.Text(res), tc.wantCode)
			sc, ok := res.StructuredContent.(map[string]any)
			require.True(t, ok, "structured error: %T", res.StructuredContent)
			require.Equal(t, tc.wantCode, sc["error"].(map[string]any)["code"])
		})
	}

	t.Run("missing required argument", func(t *testing.T) {
		res := mcptest.Call(t, acme, mcpserver.ToolGetRun, map[string]any{})
		require.True(t, res.IsError, mcptest.Text(res))
	})
	t.Run("operator and admin tools", func(t *testing.T) {
		var drained httpapi.DrainResponse
		mcptest.CallOK(t, operator, mcpserver.ToolDrainSharedQueue, map[string]any{}, &drained)
		var ten httpapi.Tenant
		mcptest.CallOK(t, admin, mcpserver.ToolPutTenant, map[string]any{"tenant_id": "globex", "isolation_mode": "dedicated",
			"max_runtime_instances": 2}, &ten)
		require.Equal(t, messages.IsolationDedicated, ten.IsolationMode)
		require.EqualValues(t, 2, ten.MaxRuntimeInstances)
		var list httpapi.InstanceList
		mcptest.CallOK(t, operator, mcpserver.ToolListInstances, map[string]any{}, &list)
		require.NotEmpty(t, list.Instances)
		id := list.Instances[0].RuntimeInstanceID
		var inst httpapi.Instance
		mcptest.CallOK(t, operator, mcpserver.ToolPauseInstance, map[string]any{"runtime_instance_id": id}, &inst)
		require.True(t, inst.IsQueuePaused)
		mcptest.CallOK(t, operator, mcpserver.ToolResumeInstance, map[string]any{"runtime_instance_id": id}, &inst)
		require.False(t, inst.IsQueuePaused)
	})
}

func TestHTTPHandler_Auth_modes(t *testing.T) {
	n := startNode(t)
	acmeTok := n.Token(t, "acme", auth.RoleTenant)
	v, err := auth.NewHS256(testSecret)
	require.NoError(t, err)

	t.Run("none falls back to the server token", func(t *testing.T) {
		url := serveMCP(t, mcpserver.Config{Server: n.URL, Token: acmeTok})
		var list httpapi.RunList
		mcptest.CallOK(t, mcptest.ConnectHTTP(t, url, ""), mcpserver.ToolListRuns, map[string]any{}, &list)
	})
	t.Run("none forwards the caller's token over the server token", func(t *testing.T) {
		url := serveMCP(t, mcpserver.Config{Server: n.URL, Token: n.Token(t, "ops", auth.RoleAdmin)})
		res := mcptest.Call(t, mcptest.ConnectHTTP(t, url, acmeTok), mcpserver.ToolDrainSharedQueue, map[string]any{})
		require.True(t, res.IsError)
		require.Contains(t, mcptest.Text(res), "HTTP 403")
	})
	t.Run("jwt refuses requests without a token", func(t *testing.T) {
		url := serveMCP(t, mcpserver.Config{Server: n.URL, Token: acmeTok, Auth: mcpserver.AuthJWT})
		resp, err := http.Post(url, "application/json", nil)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
	t.Run("jwt with verifier refuses a bad token", func(t *testing.T) {
		url := serveMCP(t, mcpserver.Config{Server: n.URL, Auth: mcpserver.AuthJWT, Verifier: v})
		req, err := http.NewRequest(http.MethodPost, url, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer not-a-jwt")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
	t.Run("jwt with verifier serves a good token", func(t *testing.T) {
		url := serveMCP(t, mcpserver.Config{Server: n.URL, Auth: mcpserver.AuthJWT, Verifier: v})
		var list httpapi.RunList
		mcptest.CallOK(t, mcptest.ConnectHTTP(t, url, acmeTok), mcpserver.ToolListRuns, map[string]any{}, &list)
	})
}

func TestNew_CallTool_usesConfigToken(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(mcpserver.Config{Server: n.URL, Token: n.Token(t, "acme", auth.RoleTenant)}).Connect(ctx, serverT, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ss.Close()) })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cs.Close()) })

	var sub httpapi.SubmitResponse
	mcptest.CallOK(t, cs, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "greet", "input": map[string]any{"name": "in-mem"}}, &sub)
	run := mcptest.WaitRun(t, cs, sub.SharedRunID)
	require.Equal(t, "acme", run.TenantID)

	res := mcptest.Call(t, cs, mcpserver.ToolDrainSharedQueue, map[string]any{})
	require.True(t, res.IsError)
	require.Contains(t, mcptest.Text(res), "HTTP 403")
}

func TestConfig_Validate_authModes(t *testing.T) {
	cases := []struct {
		auth    string
		wantErr bool
	}{{"", false}, {mcpserver.AuthNone, false}, {mcpserver.AuthJWT, false}, {"basic", true}}
	for _, tc := range cases {
		t.Run(tc.auth, func(t *testing.T) {
			err := mcpserver.Config{Auth: tc.auth}.Validate()
			if tc.wantErr {
				require.ErrorIs(t, err, mcpserver.ErrInvalidConfig)
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestListenAndServe_refusesExposedToken(t *testing.T) {
	err := mcpserver.ListenAndServe(context.Background(), "0.0.0.0:0", mcpserver.Config{Token: "t"}, nil)
	require.ErrorIs(t, err, mcpserver.ErrInvalidConfig)
}

// Without auth, the MCP server would forward anyone's calls without a token: in front of a node
// that serves without auth on loopback (dair dev), that exposes its whole API. It refuses.
func TestListenAndServe_refusesExposedNoAuth(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		err := mcpserver.ListenAndServe(context.Background(), addr, mcpserver.Config{}, nil)
		require.ErrorIs(t, err, mcpserver.ErrInvalidConfig, addr)
		require.ErrorContains(t, err, "not loopback", addr)
	}
}
