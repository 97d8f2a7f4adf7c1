package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/testkit"
)

// diamond's steps sort by id as a, b, join, root; by graph level they are root, a, b, join.
const diamond = testkit.DiamondPipeline

func TestServer_GetRun_stepsInGraphOrderWithNeeds(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(diamond)
	run := f.waitRun(f.submit(`{"pipeline":"diamond"}`).SharedRunID, isFinal)
	var ids []string
	needs := map[string][]string{}
	for _, s := range run.Steps {
		ids = append(ids, s.ID)
		needs[s.ID] = s.Needs
	}
	if !slices.Equal(ids, []string{"root", "a", "b", "join"}) {
		t.Fatalf("steps = %v, want graph order root, a, b, join", ids)
	}
	if !slices.Equal(needs["join"], []string{"a", "b"}) || len(needs["root"]) != 0 || !slices.Equal(needs["a"], []string{"root"}) {
		t.Fatalf("needs = %v", needs)
	}
}

func TestServer_ListRuns_pipelineFilter(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(diamond)
	f.putPipeline(threeStep)
	d := f.submit(`{"pipeline":"diamond"}`).SharedRunID
	f.submit(`{"pipeline":"three","input":{"name":"x"}}`)
	f.submit(`{"pipeline":"three","input":{"name":"y"}}`)
	var l httpapi.RunList
	f.call("GET", "/v1/runs?pipeline=diamond", "", http.StatusOK, &l)
	if len(l.Runs) != 1 || l.Runs[0].SharedRunID != d {
		t.Fatalf("pipeline=diamond lists %+v", l.Runs)
	}
	f.call("GET", "/v1/runs?pipeline=three&limit=1", "", http.StatusOK, &l)
	if len(l.Runs) != 1 || l.Runs[0].Pipeline != "three" {
		t.Fatalf("pipeline=three&limit=1 lists %+v", l.Runs)
	}
	f.call("GET", "/v1/runs?pipeline=nosuch", "", http.StatusOK, &l)
	if len(l.Runs) != 0 {
		t.Fatalf("pipeline=nosuch lists %+v", l.Runs)
	}
}

func TestServer_SubmitRun_idempotencyKeyHeader(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	submit := func(body string, want int, hdr ...string) []byte {
		t.Helper()
		code, b := f.do("POST", "/v1/runs", body, hdr...)
		if code != want {
			t.Fatalf("POST /v1/runs %s (headers %v) = %d %s, want %d", body, hdr, code, b, want)
		}
		return b
	}
	var first, again httpapi.SubmitResponse
	mustJSON(t, submit(`{"pipeline":"three","input":{"name":"a"}}`, http.StatusAccepted, "Idempotency-Key", "k1"), &first)
	mustJSON(t, submit(`{"pipeline":"three","input":{ "name" : "a" }}`, http.StatusAccepted, "Idempotency-Key", "k1"), &again)
	if again.SharedRunID != first.SharedRunID {
		t.Fatalf("the header's key was ignored: %s then %s", first.SharedRunID, again.SharedRunID)
	}
	mustJSON(t, submit(`{"pipeline":"three","input":{"name":"a"},"idempotency_key":"k1"}`, http.StatusAccepted), &again)
	if again.SharedRunID != first.SharedRunID {
		t.Fatalf("header and body keys differ in effect: %s then %s", first.SharedRunID, again.SharedRunID)
	}
	var eb httpapi.ErrorBody
	mustJSON(t, submit(`{"pipeline":"three","input":{"name":"b"}}`, http.StatusConflict, "Idempotency-Key", "k1"), &eb)
	if eb.Error.Code != httpapi.CodeIdempotencyConflict {
		t.Fatalf("reused key with another input: %+v", eb)
	}
	mustJSON(t, submit(`{"pipeline":"three","idempotency_key":"k2"}`, http.StatusBadRequest, "Idempotency-Key", "k3"), &eb)
	if eb.Error.Code != httpapi.CodeBadRequest {
		t.Fatalf("header and body keys differ: %+v", eb)
	}
}

func mustJSON(t *testing.T, b []byte, out any) {
	t.Helper()
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

const greetSchema = `
key: greet
input_schema:
  type: object
  required: [name]
  properties:
    name: {type: string}
steps:
  - id: hello
    uses: echo
    with: {value: "hello {{ .input.name }}"}
`

func TestServer_SubmitRun_inputSchema(t *testing.T) {
	f := newFixture(t, false, nil)
	var put httpapi.Pipeline
	f.call("PUT", "/v1/pipelines/greet", greetSchema, http.StatusOK, &put)
	if len(put.Warnings) != 0 || string(put.InputSchema) == "" || put.Steps != 1 {
		t.Fatalf("put = %+v", put)
	}
	for _, tc := range []struct{ body, wantMsg string }{
		{`{"pipeline":"greet"}`, `no input given`},
		{`{"pipeline":"greet","input":{}}`, `at \"/name\"`},
		{`{"pipeline":"greet","input":{"name":3}}`, `want string`},
	} {
		b := f.call("POST", "/v1/runs", tc.body, http.StatusBadRequest, nil)
		var eb httpapi.ErrorBody
		mustJSON(t, b, &eb)
		if eb.Error.Code != httpapi.CodeInvalidInput || !contains(string(b), tc.wantMsg) {
			t.Fatalf("POST %s = %s, want invalid_input with %s", tc.body, b, tc.wantMsg)
		}
	}
	var l httpapi.RunList
	f.call("GET", "/v1/runs", "", http.StatusOK, &l)
	if len(l.Runs) != 0 {
		t.Fatalf("refused inputs created runs: %+v", l.Runs)
	}
	run := f.waitRun(f.submit(`{"pipeline":"greet","input":{"name":"ada"}}`).SharedRunID, isFinal)
	if run.Status != "succeeded" {
		t.Fatalf("valid input: %+v", run)
	}
}

func TestServer_PutPipeline_inputWarnings(t *testing.T) {
	f := newFixture(t, false, nil)
	var put httpapi.Pipeline
	f.call("PUT", "/v1/pipelines/three", threeStep, http.StatusOK, &put)
	if len(put.Warnings) == 0 || !contains(put.Warnings[0], ".input.name") {
		t.Fatalf("warnings = %q", put.Warnings)
	}
	var got httpapi.Pipeline
	f.call("GET", "/v1/pipelines/three", "", http.StatusOK, &got)
	if len(got.Warnings) != 0 {
		t.Fatalf("GET carries PUT's warnings: %+v", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestServer_Whoami(t *testing.T) {
	f := newFixture(t, true, nil)
	var who httpapi.Whoami
	f.as(mintToken(t, "acme", "tenant")).call("GET", "/v1/whoami", "", http.StatusOK, &who)
	if who.TenantID != "acme" || who.Subject != "user-acme" || !slices.Equal(who.Roles, []string{"tenant"}) ||
		who.Auth != "jwt" || who.ExpiresAt == nil {
		t.Fatalf("whoami = %+v", who)
	}
	f.callErr("GET", "/v1/whoami", "", http.StatusUnauthorized, httpapi.CodeUnauthenticated)
	open := newFixture(t, false, nil)
	open.call("GET", "/v1/whoami", "", http.StatusOK, &who)
	if who.Auth != "none" || !slices.Equal(who.Roles, []string{"admin"}) {
		t.Fatalf("whoami without auth = %+v", who)
	}
}

func TestServer_CheckPipeline(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(diamond)
	run := f.waitRun(f.submit(`{"pipeline":"diamond"}`).SharedRunID, isFinal)
	var res httpapi.PipelineCheck
	f.call("POST", "/v1/pipelines/diamond/check", diamond, http.StatusOK, &res)
	if res.Key != "diamond" || res.Checked != 1 || len(res.Divergent) != 0 {
		t.Fatalf("same definition: %+v", res)
	}
	removed := strings.Replace(diamond, "  - id: join\n    uses: echo\n    needs: [a, b]\n    with: {value: j}\n", "", 1)
	f.call("POST", "/v1/pipelines/diamond/check?last=5", removed, http.StatusOK, &res)
	if len(res.Divergent) != 1 || res.Divergent[0].StepID != "join" || res.Divergent[0].ExecutionID != run.ExecutionID ||
		!strings.HasPrefix(res.Divergent[0].Reason, "step-removed") {
		t.Fatalf("removed step: %+v", res)
	}
	f.callErr("POST", "/v1/pipelines/other/check", diamond, http.StatusBadRequest, httpapi.CodeBadRequest)
	f.callErr("POST", "/v1/pipelines/diamond/check?last=0", diamond, http.StatusBadRequest, httpapi.CodeBadRequest)
	f.callErr("POST", "/v1/pipelines/diamond/check", "key: diamond\nsteps: []\n", http.StatusBadRequest, httpapi.CodeInvalidPipeline)
	var got httpapi.Pipeline
	f.call("GET", "/v1/pipelines/diamond", "", http.StatusOK, &got)
	if !strings.Contains(got.Source, "join") {
		t.Fatal("check stored the definition")
	}
}

// TestServer_SubmitRun_tenantInTheQuery: with auth none a caller may name its tenant in the
// query instead of the body (docs/api.md); the run is that tenant's, not the default's.
func TestServer_SubmitRun_tenantInTheQuery(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	var sub httpapi.SubmitResponse
	mustJSON(t, f.call("POST", "/v1/runs?tenant_id=globex", `{"pipeline":"three","input":{"name":"a"}}`, http.StatusAccepted, nil), &sub)
	var run httpapi.Run
	f.call("GET", "/v1/runs/"+sub.SharedRunID, "", http.StatusOK, &run)
	if run.TenantID != "globex" {
		t.Fatalf("the run's tenant is %q, want globex (named in the query)", run.TenantID)
	}
}
