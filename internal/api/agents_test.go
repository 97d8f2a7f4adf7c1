package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// agentFixture is an auth-on fixture whose node owns test agent types: greet (counts its
// messages per agent and replies {tenant, count, got}), text (a non-JSON reply), slow (never
// replies), boom (fails) and private (acme only); acme subscribes greet to the "orders."
// topics.
func agentFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	greet := func(_ context.Context, a *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		n, _ := a.State().(int)
		n++
		a.SetState(n)
		return json.Marshal(map[string]any{"tenant": a.Tenant(), "count": n, "got": json.RawMessage(env.Payload)})
	}
	types := []struct {
		name string
		h    actors.AgentHandler
		opts []actors.AgentTypeOption
	}{
		{"greet", greet, nil},
		{"text", func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
			return []byte("plain reply"), nil
		}, nil},
		{"slow", func(ctx context.Context, _ *actors.Agent, _ *messages.MessageEnvelope) ([]byte, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil},
		{"boom", func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
			return nil, errors.New("kaput")
		}, nil},
		{"private", greet, []actors.AgentTypeOption{actors.ForTenants("acme")}},
	}
	for _, ty := range types {
		if err := f.node.RegisterAgentType(ctx, ty.name, ty.h, ty.opts...); err != nil {
			t.Fatalf("register %s: %v", ty.name, err)
		}
	}
	if _, err := f.node.Subscribe(ctx, &messages.Subscription{TenantId: "acme", TopicPrefix: "orders.", AgentType: "greet"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAPI_Agents_send_eachOutcome(t *testing.T) {
	f := agentFixture(t)
	acme, globex := f.as(mintToken(t, "acme", "tenant")), f.as(mintToken(t, "globex", "tenant"))
	tests := []struct {
		name     string
		who      *fixture
		path     string
		body     string
		outcome  string
		code     string
		response string
	}{
		{"delivered", acme, "/v1/agents/greet/k1/messages", `{"message":{"hi":1}}`, httpapi.OutcomeDelivered, "",
			`{"count":1,"got":{"hi":1},"tenant":"acme"}`},
		{"delivered again", acme, "/v1/agents/greet/k1/messages", `{"message":2}`, httpapi.OutcomeDelivered, "",
			`{"count":2,"got":2,"tenant":"acme"}`},
		{"key with a slash", acme, "/v1/agents/greet/a%2Fb/messages", `{"message":null}`, httpapi.OutcomeDelivered, "",
			`{"count":1,"got":null,"tenant":"acme"}`},
		{"non-JSON reply", acme, "/v1/agents/text/k/messages", `{"message":"x"}`, httpapi.OutcomeDelivered, "", `"plain reply"`},
		{"timeout", acme, "/v1/agents/slow/k/messages", `{"message":1,"timeout":"100ms"}`, httpapi.OutcomeTimeout,
			agents.ReasonDeadlineExceeded, ""},
		{"no live owner", acme, "/v1/agents/nobody/k/messages", `{"message":1}`, httpapi.OutcomeUndeliverable,
			agents.ReasonNoLiveOwner, ""},
		{"tenant refused", globex, "/v1/agents/private/k/messages", `{"message":1}`, httpapi.OutcomeUndeliverable,
			agents.ReasonTenantRefused, ""},
		{"handler error", acme, "/v1/agents/boom/k/messages", `{"message":1}`, httpapi.OutcomeError, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o httpapi.AgentSendResponse
			tt.who.call("POST", tt.path, tt.body, http.StatusOK, &o)
			if o.Outcome != tt.outcome || o.ReasonCode != tt.code {
				t.Fatalf("outcome = %+v, want %s %q", o, tt.outcome, tt.code)
			}
			if tt.response != "" && string(o.Response) != tt.response {
				t.Fatalf("response = %s, want %s", o.Response, tt.response)
			}
			if o.Outcome == httpapi.OutcomeError && !strings.Contains(o.Reason, "kaput") {
				t.Fatalf("error reason = %q", o.Reason)
			}
			if o.Outcome != httpapi.OutcomeDelivered && o.Reason == "" {
				t.Fatal("a non-delivered outcome has no reason")
			}
			if o.MessageID == "" {
				t.Fatal("no message id")
			}
		})
	}
}

func TestAPI_Agents_tenancy_tokenTenantOnly(t *testing.T) {
	f := agentFixture(t)
	acme, globex := f.as(mintToken(t, "acme", "tenant")), f.as(mintToken(t, "globex", "tenant"))
	acme.call("POST", "/v1/agents/greet/shared/messages", `{"message":1}`, http.StatusOK, nil)
	// A tenant token cannot name another tenant: 403, nothing delivered.
	acme.callErr("POST", "/v1/agents/greet/shared/messages", `{"tenant_id":"globex","message":1}`, http.StatusForbidden,
		httpapi.CodeForbidden)
	acme.callErr("POST", "/v1/topics/orders.x%2Fshared/messages", `{"tenant_id":"globex","message":1}`, http.StatusForbidden,
		httpapi.CodeForbidden)
	// The same id under another tenant is another agent: globex's first message counts 1.
	var o httpapi.AgentSendResponse
	globex.call("POST", "/v1/agents/greet/shared/messages", `{"tenant_id":"globex","message":1}`, http.StatusOK, &o)
	if string(o.Response) != `{"count":1,"got":1,"tenant":"globex"}` {
		t.Fatalf("globex's agent answered %s", o.Response)
	}
	acme.call("POST", "/v1/agents/greet/shared/messages", `{"message":1}`, http.StatusOK, &o)
	if string(o.Response) != `{"count":2,"got":1,"tenant":"acme"}` {
		t.Fatalf("acme's agent answered %s", o.Response)
	}
	f.callErr("POST", "/v1/agents/greet/k/messages", `{"message":1}`, http.StatusUnauthorized, httpapi.CodeUnauthenticated)
}

func TestAPI_Agents_publish_topicMapping(t *testing.T) {
	f := agentFixture(t)
	acme, globex := f.as(mintToken(t, "acme", "tenant")), f.as(mintToken(t, "globex", "tenant"))
	tests := []struct {
		name, path  string
		who         *fixture
		deliveries  int
		typ, source string
	}{
		{"escaped source", "/v1/topics/orders.created%2Fo-1/messages", acme, 1, "orders.created", "o-1"},
		{"unescaped source", "/v1/topics/orders.paid/o-1/messages", acme, 1, "orders.paid", "o-1"},
		{"source with a slash", "/v1/topics/orders.paid/a/b/messages", acme, 1, "orders.paid", "a/b"},
		{"no match", "/v1/topics/clicks%2Fo-1/messages", acme, 0, "clicks", "o-1"},
		{"no source: no recipient key", "/v1/topics/orders.created/messages", acme, 0, "orders.created", ""},
		{"other tenant's subscriptions", "/v1/topics/orders.created%2Fo-1/messages", globex, 0, "orders.created", "o-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p httpapi.AgentPublishResponse
			tt.who.call("POST", tt.path, `{"message":{"n":1}}`, http.StatusAccepted, &p)
			if p.Deliveries != tt.deliveries || p.TopicType != tt.typ || p.TopicSource != tt.source {
				t.Fatalf("publish = %+v, want %d deliveries to %s/%s", p, tt.deliveries, tt.typ, tt.source)
			}
		})
	}
	// greet/o-1 of acme got both publishes (enqueued before the answers) before this send.
	var o httpapi.AgentSendResponse
	acme.call("POST", "/v1/agents/greet/o-1/messages", `{"message":"peek"}`, http.StatusOK, &o)
	if string(o.Response) != `{"count":3,"got":"peek","tenant":"acme"}` {
		t.Fatalf("greet/o-1 answered %s, want count 3", o.Response)
	}
	acme.callErr("POST", "/v1/topics/orders.created", `{"message":1}`, http.StatusNotFound, httpapi.CodeNotFound)
}

func TestAPI_Agents_list_tenantAndOperatorViews(t *testing.T) {
	f := agentFixture(t)
	var l httpapi.AgentList
	f.as(mintToken(t, "acme", "tenant")).call("GET", "/v1/agents", "", http.StatusOK, &l)
	names := make([]string, 0, len(l.Agents))
	for _, a := range l.Agents {
		names = append(names, a.Type)
		if len(a.Owners) != 1 || len(a.OwnerNodes) != 1 || a.OwnerNodes[0] != "api-test" {
			t.Fatalf("type %+v: want one owner on api-test", a)
		}
	}
	if !slices.Equal(names, []string{"boom", "greet", "private", "slow", "text"}) || l.Workers != nil || l.PendingSessions != nil {
		t.Fatalf("tenant view: %+v", l)
	}
	f.as(mintToken(t, "ops", "operator")).call("GET", "/v1/agents", "", http.StatusOK, &l)
	if len(l.Workers) != 1 || !l.Workers[0].Self || l.Workers[0].NodeID != "api-test" || l.Workers[0].Subscriptions != 1 ||
		l.PendingSessions == nil || *l.PendingSessions != 0 {
		t.Fatalf("operator view: %+v", l)
	}
}

func TestAPI_Agents_badInput(t *testing.T) {
	f := agentFixture(t)
	acme := f.as(mintToken(t, "acme", "tenant"))
	for _, tt := range []struct{ name, path, body string }{
		{"bad type", "/v1/agents/Greet/k/messages", `{"message":1}`},
		{"no message", "/v1/agents/greet/k/messages", `{}`},
		{"empty body", "/v1/agents/greet/k/messages", ``},
		{"unknown field", "/v1/agents/greet/k/messages", `{"message":1,"msg":2}`},
		{"bad timeout", "/v1/agents/greet/k/messages", `{"message":1,"timeout":"soon"}`},
		{"negative timeout", "/v1/agents/greet/k/messages", `{"message":1,"timeout":"-1s"}`},
		{"huge timeout", "/v1/agents/greet/k/messages", `{"message":1,"timeout":"24h"}`},
		{"malformed json", "/v1/agents/greet/k/messages", `{"message":`},
		{"empty topic type", "/v1/topics/%2Fsrc/messages", `{"message":1}`},
		{"publish without message", "/v1/topics/t/messages", `{}`},
		{"message not utf-8", "/v1/agents/greet/k/messages", "{\"message\":\"\xff\"}"},
		{"message number overflows", "/v1/agents/greet/k/messages", `{"message":1e400}`},
		{"message lone surrogate", "/v1/agents/greet/k/messages", `{"message":"\ud800"}`},
		{"published message not utf-8", "/v1/topics/t/messages", "{\"message\":{\"a\":\"\xff\"}}"},
		{"empty key segment", "/v1/agents/greet//messages", `{"message":1}`},
		{"empty topic segment", "/v1/topics//messages", `{"message":1}`},
		{"dot-dot key unescaped", "/v1/agents/greet/../messages", `{"message":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acme.callErr("POST", tt.path, tt.body, http.StatusBadRequest, "")
		})
	}
}

// TestAPI_Agents_dotKeys: "." and ".." are keys like any other when escaped (%2E).
func TestAPI_Agents_dotKeys(t *testing.T) {
	f := agentFixture(t)
	acme := f.as(mintToken(t, "acme", "tenant"))
	for _, path := range []string{"/v1/agents/greet/%2E/messages", "/v1/agents/greet/%2E%2E/messages"} {
		code, b := acme.do("POST", path, `{"message":1}`)
		if code != http.StatusOK || !strings.Contains(string(b), `"delivered"`) {
			t.Fatalf("POST %s = %d %s, want a delivery", path, code, b)
		}
	}
}

// A send or publish names a tenant as a run does: an id no tenant can have is a 400 (with auth
// off, where the body names it, and with a token that names one), a suspended tenant a 423 until
// it is resumed.
func TestAPI_Agents_tenantChecks(t *testing.T) {
	f := newFixture(t, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.node.RegisterAgentType(ctx, "greet", func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
		return []byte(`"hi"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"ba/d", "has space", "Acme", strings.Repeat("a", 300), "-lead", "ac\u00e9"} {
		body, _ := json.Marshal(map[string]any{"tenant_id": tenant, "message": 1})
		t.Run("send "+tenant[:min(len(tenant), 12)], func(t *testing.T) {
			e := f.callErr("POST", "/v1/agents/greet/k/messages", string(body), http.StatusBadRequest, httpapi.CodeBadRequest)
			if !strings.Contains(e.Error.Message, "tenant_id") {
				t.Errorf("message %q does not name tenant_id", e.Error.Message)
			}
		})
		t.Run("publish "+tenant[:min(len(tenant), 12)], func(t *testing.T) {
			f.callErr("POST", "/v1/topics/orders/messages", string(body), http.StatusBadRequest, httpapi.CodeBadRequest)
		})
	}
	if _, err := f.node.PutTenant(ctx, &messages.TenantSettings{TenantId: "susp", IsolationMode: "shared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.node.SetSuspended(ctx, "susp", true); err != nil {
		t.Fatal(err)
	}
	sent := f.callErr("POST", "/v1/agents/greet/k/messages", `{"tenant_id":"susp","message":1}`, http.StatusLocked, httpapi.CodeTenantSuspended)
	f.callErr("POST", "/v1/topics/orders/messages", `{"tenant_id":"susp","message":1}`, http.StatusLocked, httpapi.CodeTenantSuspended)
	// A submit of the suspended tenant is refused in the same words.
	f.putPipeline(threeStep)
	sub := f.callErr("POST", "/v1/runs", `{"pipeline":"three","tenant_id":"susp","input":{"name":"a"}}`, http.StatusLocked, httpapi.CodeTenantSuspended)
	if want := `api: tenant "susp" is suspended`; sent.Error.Message != want || sub.Error.Message != want {
		t.Fatalf("send answered %q, submit %q; want both %q", sent.Error.Message, sub.Error.Message, want)
	}
	if _, err := f.node.SetSuspended(ctx, "susp", false); err != nil {
		t.Fatal(err)
	}
	var out httpapi.AgentSendResponse
	f.call("POST", "/v1/agents/greet/k/messages", `{"tenant_id":"susp","message":1}`, http.StatusOK, &out)
	if out.Outcome != "delivered" {
		t.Fatalf("after resume: %+v", out)
	}

	// A token naming no tenant id is refused before anything else.
	authed := newFixture(t, true, nil)
	bad := rawToken(t, testSecret, jwt.MapClaims{"tenant_id": "ba/d", "org_id": "o", "sub": "s", "roles": []string{"tenant"},
		"exp": time.Now().Add(time.Hour).Unix()})
	authed.as(bad).callErr("POST", "/v1/agents/greet/k/messages", `{"message":1}`, http.StatusUnauthorized, httpapi.CodeUnauthenticated)
	authed.as(bad).callErr("GET", "/v1/runs", "", http.StatusUnauthorized, httpapi.CodeUnauthenticated)
}
