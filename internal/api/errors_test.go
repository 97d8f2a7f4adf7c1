package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
)

func TestServer_Errors_badInput(t *testing.T) {
	f := newFixture(t, false, func(c *api.Config) { c.MaxBodyBytes = 4096 })
	f.putPipeline(threeStep)
	f.call("PUT", "/v1/tenants/frozen", `{"isolation_mode":"shared"}`, http.StatusOK, nil)
	f.call("POST", "/v1/tenants/frozen/suspend", "", http.StatusOK, nil)
	big := `{"pipeline":"three","input":{"x":"` + strings.Repeat("a", 5000) + `"}}`

	tests := []struct {
		name         string
		method, path string
		body         string
		status       int
		code         string
		msgHas       string
	}{
		{"malformed json", "POST", "/v1/runs", `{"pipeline":`, 400, httpapi.CodeBadRequest, "malformed json"},
		{"unknown field", "POST", "/v1/runs", `{"pipeline":"three","bogus":1}`, 400, httpapi.CodeBadRequest, "bogus"},
		{"trailing data", "POST", "/v1/runs", `{"pipeline":"three"} {}`, 400, httpapi.CodeBadRequest, "trailing"},
		{"empty body", "POST", "/v1/runs", ``, 400, httpapi.CodeBadRequest, "empty"},
		{"missing pipeline", "POST", "/v1/runs", `{"tenant_id":"acme"}`, 400, httpapi.CodeBadRequest, "pipeline"},
		{"bad tenant id", "POST", "/v1/runs", `{"pipeline":"three","tenant_id":"bad tenant!"}`, 400, httpapi.CodeBadRequest, "tenant"},
		{"unknown pipeline", "POST", "/v1/runs", `{"pipeline":"nope"}`, 404, httpapi.CodeUnknownPipeline, "nope"},
		{"oversize", "POST", "/v1/runs", big, 413, httpapi.CodeRequestTooLarge, ""},
		{"suspended tenant", "POST", "/v1/runs", `{"pipeline":"three","tenant_id":"frozen"}`, 423, httpapi.CodeTenantSuspended, "frozen"},
		{"unknown run", "GET", "/v1/runs/run-nope", "", 404, httpapi.CodeNotFound, ""},
		{"unknown run events", "GET", "/v1/runs/run-nope/events", "", 404, httpapi.CodeNotFound, ""},
		{"unknown run cancel", "POST", "/v1/runs/run-nope/cancel", "", 404, httpapi.CodeNotFound, ""},
		{"bad status filter", "GET", "/v1/runs?status=weird", "", 400, httpapi.CodeBadRequest, "weird"},
		{"bad limit", "GET", "/v1/runs?limit=x", "", 400, httpapi.CodeBadRequest, "limit"},
		{"bad tenant filter", "GET", "/v1/runs?tenant_id=Bad%20Tenant", "", 400, httpapi.CodeBadRequest, "tenant_id"},
		{"unknown execution", "GET", "/v1/executions/nope/ledger", "", 404, httpapi.CodeNotFound, ""},
		{"unknown execution trace", "GET", "/v1/executions/nope/trace", "", 404, httpapi.CodeNotFound, ""},
		{"unknown execution replay", "POST", "/v1/executions/nope/replay", "", 404, httpapi.CodeNotFound, ""},
		{"unknown instance", "POST", "/v1/instances/nope/pause", "", 404, httpapi.CodeNotFound, ""},
		{"unknown pipeline get", "GET", "/v1/pipelines/nope", "", 404, httpapi.CodeNotFound, ""},
		{"unknown pipeline version", "GET", "/v1/pipelines/three?hash=zzz", "", 404, httpapi.CodeNotFound, `pipeline "three" has no version with hash "zzz"`},
		{"unknown pipeline, a version asked", "GET", "/v1/pipelines/nope?hash=zzz", "", 404, httpapi.CodeNotFound, `pipeline "nope" not found`},
		{"bad tenant filter of instances", "GET", "/v1/instances?tenant_id=BAD", "", 400, httpapi.CodeBadRequest, "tenant_id"},
		{"an agent type not lower case", "POST", "/v1/agents/Echo/k/messages", `{"message":1}`, 400, httpapi.CodeBadRequest, "api: invalid agent id"},
		{"a topic with a space", "POST", "/v1/topics/orders%20x/messages", `{"message":1}`, 400, httpapi.CodeBadRequest, `api: topic "orders x": invalid topic`},
		{"bad tenant id in the query", "POST", "/v1/runs?tenant_id=BAD", `{"pipeline":"three"}`, 400, httpapi.CodeBadRequest, "tenant"},
		{"query and body tenants differ", "POST", "/v1/runs?tenant_id=acme", `{"pipeline":"three","tenant_id":"globex"}`, 400,
			httpapi.CodeBadRequest, `tenant_id "acme" in the query differs from tenant_id "globex" in the body`},
		{"bad tenant id in a send's query", "POST", "/v1/agents/counter/k/messages?tenant_id=BAD", `{"message":1}`, 400, httpapi.CodeBadRequest, "tenant"},
		{"the topics root", "POST", "/v1/topics", `{"message":1}`, 404, httpapi.CodeNotFound, "no route for POST /v1/topics"},
		{"a topic without messages", "GET", "/v1/topics/foo", "", 404, httpapi.CodeNotFound, "no route for GET /v1/topics/foo"},
		{"a topic's messages by GET", "GET", "/v1/topics/foo/messages", "", 405, httpapi.CodeMethodNotAllowed, "takes POST"},
		{"a null body", "POST", "/v1/runs", `null`, 400, httpapi.CodeBadRequest, "the body: want an object, got null"},
		{"unknown route", "GET", "/v1/nothing", "", 404, httpapi.CodeNotFound, ""},
		{"body of the wrong type", "POST", "/v1/runs", `[1]`, 400, httpapi.CodeBadRequest, "the body: want an object, got array"},
		{"field of the wrong type", "PUT", "/v1/tenants/acme", `{"runs_per_second":"fast"}`, 400, httpapi.CodeBadRequest,
			`field "runs_per_second": want a number, got string`},
		{"idempotency key not UTF-8", "POST", "/v1/runs", "{\"pipeline\":\"three\",\"idempotency_key\":\"k\xff\"}", 400,
			httpapi.CodeBadRequest, "not valid UTF-8"},
		{"idempotency key with an unpaired surrogate", "POST", "/v1/runs", `{"pipeline":"three","idempotency_key":"k\ud800"}`, 400,
			httpapi.CodeBadRequest, "unpaired UTF-16 surrogate"},
		{"correlation id not UTF-8", "POST", "/v1/runs", "{\"pipeline\":\"three\",\"correlation_id\":\"\xfe\"}", 400,
			httpapi.CodeBadRequest, "not valid UTF-8"},
		{"a field in another case", "POST", "/v1/runs", `{"pipeline":"three","TENANT_ID":"other"}`, 400, httpapi.CodeBadRequest,
			`unknown field "TENANT_ID" (at TENANT_ID): field names are case-sensitive; the field is "tenant_id"`},
		{"a rate that underflows", "PUT", "/v1/tenants/acme", `{"runs_per_second":1e-400}`, 400, httpapi.CodeBadRequest,
			"number 1e-400 (at runs_per_second) is too small"},
		{"pipeline json spelling a field in another case", "PUT", "/v1/pipelines/case", `{"key":"case","steps":[{"id":"a","uses":"echo","Uses":"fail"}]}`,
			400, httpapi.CodeInvalidPipeline, `unknown field "Uses"`},
		{"pipeline json repeating a key", "PUT", "/v1/pipelines/dup", `{"key":"dup","steps":[{"id":"a","uses":"echo","uses":"sleep"}]}`, 400,
			httpapi.CodeInvalidPipeline, `key "uses" appears twice`},
		{"idempotency key too long", "POST", "/v1/runs", `{"pipeline":"three","idempotency_key":"` + strings.Repeat("k", 300) + `"}`,
			400, httpapi.CodeBadRequest, "idempotency_key has 300 bytes"},
		{"correlation id with a control character", "POST", "/v1/runs", `{"pipeline":"three","correlation_id":"a\u0001b"}`,
			400, httpapi.CodeBadRequest, "correlation_id"},
		{"session id too long", "POST", "/v1/sessions/" + strings.Repeat("s", 300) + "/invoke", `{"pipeline":"three"}`,
			400, httpapi.CodeBadRequest, "session_id"},
		{"tenant id too long to suspend", "POST", "/v1/tenants/" + strings.Repeat("t", 40000) + "/suspend", "", 400, httpapi.CodeBadRequest, "tenant_id"},
		{"bad tenant id to resume", "POST", "/v1/tenants/BAD/resume", "", 400, httpapi.CodeBadRequest, "tenant_id"},
		{"bad tenant id usage", "GET", "/v1/tenants/BAD/usage", "", 400, httpapi.CodeBadRequest, "tenant_id"},
		{"bad tenant id get", "GET", "/v1/tenants/..%2Fx", "", 400, httpapi.CodeBadRequest, "tenant_id"},
		{"wrong method", "GET", "/v1/agents/counter/k/messages", "", 405, httpapi.CodeMethodNotAllowed, "takes POST"},
		{"wrong method, two allowed", "DELETE", "/v1/runs", "", 405, httpapi.CodeMethodNotAllowed, "takes GET, POST"},
		{"wrong method on a run", "PUT", "/v1/runs/run-x/cancel", "", 405, httpapi.CodeMethodNotAllowed, "takes POST"},
		{"invalid pipeline cycle", "PUT", "/v1/pipelines/cyc", "key: cyc\nsteps:\n  - {id: a, uses: echo, needs: [b]}\n  - {id: b, uses: echo, needs: [a]}\n",
			400, httpapi.CodeInvalidPipeline, "dag: cycle: a -> b -> a"},
		{"invalid pipeline handler", "PUT", "/v1/pipelines/h", "key: h\nsteps:\n  - {id: a, uses: nosuch}\n", 400, httpapi.CodeInvalidPipeline, "unknown_handler"},
		{"invalid agent.send step", "PUT", "/v1/pipelines/as", "key: as\nsteps:\n  - {id: a, uses: agent.send, with: {message: 1}}\n",
			400, httpapi.CodeInvalidPipeline, "with.agent"},
		{"invalid agent.publish step", "PUT", "/v1/pipelines/ap", "key: ap\nsteps:\n  - {id: a, uses: agent.publish, with: {topic: t, bogus: 1}}\n",
			400, httpapi.CodeInvalidPipeline, "bogus"},
		{"invalid pipeline yaml", "PUT", "/v1/pipelines/y", "key: [", 400, httpapi.CodeInvalidPipeline, "dag: parse"},
		{"pipeline key mismatch", "PUT", "/v1/pipelines/other", threeStep, 400, httpapi.CodeBadRequest, "differs"},
		{"empty pipeline", "PUT", "/v1/pipelines/x", "", 400, httpapi.CodeBadRequest, "empty"},
		{"invalid tenant settings", "PUT", "/v1/tenants/acme", `{"isolation_mode":"galactic"}`, 400, httpapi.CodeInvalidSettings, "isolation"},
		{"tenant id mismatch", "PUT", "/v1/tenants/acme", `{"tenant_id":"other"}`, 400, httpapi.CodeBadRequest, "differs"},
		{"tenant unknown field", "PUT", "/v1/tenants/acme", `{"colour":"red"}`, 400, httpapi.CodeBadRequest, "colour"},
		{"bad last event id", "GET", "/v1/runs/run-nope/events?last_event_id=x", "", 400, httpapi.CodeBadRequest, "last event id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eb := f.callErr(tt.method, tt.path, tt.body, tt.status, tt.code)
			if !strings.Contains(eb.Error.Message, tt.msgHas) {
				t.Fatalf("message %q lacks %q", eb.Error.Message, tt.msgHas)
			}
		})
	}
}

func TestServer_Errors_oversizeChunked(t *testing.T) {
	f := newFixture(t, false, func(c *api.Config) { c.MaxBodyBytes = 1024 })
	big := strings.Repeat("a", 4096)
	req, err := http.NewRequest("PUT", f.srv.URL+"/v1/pipelines/x", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked: the limit applies while reading
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBody(t, resp)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", resp.StatusCode)
	}
	var eb httpapi.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatal(err)
	}
	// Worded as the refusal of a declared length.
	if eb.Error.Message != "api: request body is larger than 1024 bytes" {
		t.Fatalf("message %q", eb.Error.Message)
	}
}
