package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
)

func TestClient_Agents_methodPathAndAnswer(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c := New(srv.URL, "tok")
	ctx := context.Background()
	set := func(status int, answer string) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.status, rec.answer = status, answer
	}
	last := func() (method, path, body string) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.method, rec.path, rec.body
	}

	set(http.StatusOK, `{"agents":[{"type":"echo","owners":["w1"],"owner_nodes":["n1"]}],"pending_sessions":0}`)
	l, err := c.ListAgents(ctx)
	require.NoError(t, err)
	_, path, _ := last()
	require.Equal(t, "/v1/agents", path)
	require.Equal(t, []string{"n1"}, l.Agents[0].OwnerNodes)

	set(http.StatusOK, `{"outcome":"delivered","response":{"count":1},"worker_id":"w1"}`)
	o, err := c.SendAgent(ctx, "counter", "a/b", httpapi.AgentSendRequest{Message: json.RawMessage(`{"x":1}`), Timeout: "2s"})
	require.NoError(t, err)
	method, path, body := last()
	require.Equal(t, http.MethodPost, method)
	require.Equal(t, "/v1/agents/counter/a%2Fb/messages", path)
	require.JSONEq(t, `{"message":{"x":1},"timeout":"2s"}`, body)
	require.Equal(t, httpapi.OutcomeDelivered, o.Outcome)
	require.JSONEq(t, `{"count":1}`, string(o.Response))

	// Dot segments are keys like any other: escaped, not resolved away.
	for key, want := range map[string]string{".": "/v1/agents/echo/%2E/messages", "..": "/v1/agents/echo/%2E%2E/messages",
		"...": "/v1/agents/echo/.../messages"} {
		set(http.StatusOK, `{"outcome":"delivered","response":1,"worker_id":"w1"}`)
		_, err := c.SendAgent(ctx, "echo", key, httpapi.AgentSendRequest{Message: json.RawMessage(`1`)})
		require.NoError(t, err)
		_, path, _ = last()
		require.Equal(t, want, path, "key %q", key)
	}

	set(http.StatusAccepted, `{"deliveries":2,"topic_type":"orders","topic_source":"o/1"}`)
	p, err := c.PublishAgent(ctx, "orders/o/1", httpapi.AgentPublishRequest{TenantID: "acme", Message: json.RawMessage(`1`)})
	require.NoError(t, err)
	_, path, _ = last()
	require.Equal(t, "/v1/topics/orders%2Fo%2F1/messages", path)
	require.Equal(t, 2, p.Deliveries)

	set(http.StatusForbidden, `{"error":{"code":"forbidden","message":"api: no"}}`)
	_, err = c.SendAgent(ctx, "counter", "k", httpapi.AgentSendRequest{Message: json.RawMessage(`1`)})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusForbidden, ce.Status)
}
