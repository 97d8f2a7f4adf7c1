package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/mcpserver/mcptest"
	"github.com/dairuntime/dair/messages"
)

func TestHTTPHandler_CallTool_agents(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tally := func(_ context.Context, a *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		k, _ := a.State().(int)
		a.SetState(k + 1)
		return json.Marshal(map[string]any{"n": k + 1, "got": json.RawMessage(env.Payload)})
	}
	require.NoError(t, n.Node.RegisterAgentType(ctx, "tally", tally))
	_, err := n.Node.Subscribe(ctx, &messages.Subscription{TenantId: "acme", Topic: "clicks", AgentType: "tally"})
	require.NoError(t, err)
	url := serveMCP(t, mcpserver.Config{Server: n.URL})
	acme := mcptest.ConnectHTTP(t, url, n.Token(t, "acme", auth.RoleTenant))

	var l httpapi.AgentList
	res := mcptest.CallOK(t, acme, mcpserver.ToolListAgents, map[string]any{}, &l)
	require.Len(t, l.Agents, 1)
	require.Contains(t, mcptest.Text(res), "tally (1 owner(s))")

	var o httpapi.AgentSendResponse
	res = mcptest.CallOK(t, acme, mcpserver.ToolSendAgentMessage, map[string]any{"agent": "tally/p1", "message": map[string]any{"a": 1}}, &o)
	require.Equal(t, httpapi.OutcomeDelivered, o.Outcome)
	require.JSONEq(t, `{"n":1,"got":{"a":1}}`, string(o.Response))
	require.Contains(t, mcptest.Text(res), "delivered")

	var p httpapi.AgentPublishResponse
	res = mcptest.CallOK(t, acme, mcpserver.ToolPublishMessage, map[string]any{"topic": "clicks/p1", "message": "click"}, &p)
	require.Equal(t, 1, p.Deliveries, mcptest.Text(res))

	// An outcome other than delivered is a result, not a tool error.
	res = mcptest.CallOK(t, acme, mcpserver.ToolSendAgentMessage, map[string]any{"agent": "nobody/k", "message": 1, "timeout": "1s"}, &o)
	require.Equal(t, httpapi.OutcomeUndeliverable, o.Outcome)
	require.Contains(t, mcptest.Text(res), "no-live-owner")
	mcptest.CallOK(t, acme, mcpserver.ToolSendAgentMessage, map[string]any{"agent": "tally/p1", "message": nil}, &o)
	require.JSONEq(t, `{"n":3,"got":null}`, string(o.Response), "the publish reached tally/p1 in between")

	for name, args := range map[string]map[string]any{
		"no key":           {"agent": "tally", "message": 1},
		"other tenant":     {"agent": "tally/p1", "message": 1, "tenant_id": "globex"},
		"bad timeout":      {"agent": "tally/p1", "message": 1, "timeout": "soon"},
		"negative timeout": {"agent": "tally/p1", "message": 1, "timeout": "-1s"},
	} {
		t.Run(name, func(t *testing.T) {
			res := mcptest.Call(t, acme, mcpserver.ToolSendAgentMessage, args)
			require.True(t, res.IsError, mcptest.Text(res))
		})
	}
	res = mcptest.Call(t, acme, mcpserver.ToolPublishMessage, map[string]any{"topic": " ", "message": 1})
	require.True(t, res.IsError, mcptest.Text(res))

	// The message reaches the agent as written: numbers past float64's precision and keys in
	// their order, as over HTTP.
	// (The agent records what it got: this test's MCP client decodes results into float64s.)
	got := make(chan string, 1)
	require.NoError(t, n.Node.RegisterAgentType(ctx, "record", func(_ context.Context, _ *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		got <- string(env.Payload)
		return []byte(`{}`), nil
	}))
	exact := `{"id":9007199254740993,"amount":0.1000000000000000055511151231257827,"big":12345678901234567890123}`
	mcptest.CallOK(t, acme, mcpserver.ToolSendAgentMessage, json.RawMessage(`{"agent":"record/exact","message":`+exact+`}`), &o)
	require.Equal(t, httpapi.OutcomeDelivered, o.Outcome)
	require.Equal(t, exact, <-got)
	// Arguments the node would refuse over HTTP are refused here, in the same words.
	for name, tc := range map[string]struct{ args, want string }{
		"unpaired surrogate": {`{"agent":"tally/p1","message":"a\udc00b"}`, "unpaired UTF-16 surrogate"},
		"overflowing number": {`{"agent":"tally/p1","message":1e400}`, "1e400"},
		"unknown field":      {`{"agent":"tally/p1","message":1,"priority":2}`, `unknown field "priority"`},
		"no message":         {`{"agent":"tally/p1"}`, "missing argument: message"},
		"a field in another case": {`{"agent":"tally/p1","message":1,"Message":2}`,
			`unknown field "Message" (at Message): field names are case-sensitive; the field is "message"`},
		"agent not a string": {`{"agent":7,"message":1}`, "agent: want a string, got number"},
	} {
		t.Run(name, func(t *testing.T) {
			res := mcptest.Call(t, acme, mcpserver.ToolSendAgentMessage, json.RawMessage(tc.args))
			require.True(t, res.IsError, mcptest.Text(res))
			require.Contains(t, mcptest.Text(res), tc.want)
		})
	}
}
