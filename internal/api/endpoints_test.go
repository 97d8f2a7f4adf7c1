package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
)

// veryLong keeps a run running for the whole matrix; the matrix cancels it at the end.
const veryLong = `
key: verylong
steps:
  - id: wait
    uses: sleep
    with: {duration: 60s}
`

// endpoint is one route of the API with a path that names existing objects.
type endpoint struct {
	method, path string
}

// matrixRow is one request of the status matrix.
type matrixRow struct {
	name         string
	who          *fixture
	method, path string
	body         string
	status       int
	code         string // error code of a non-2xx answer; empty means any
}

// TestServer_Endpoints_statusMatrix checks every endpoint of CONTRACT.md's HTTP API table (and
// the usage endpoint) for its happy path and each error status that applies to it: 400
// malformed or unknown-field JSON and bad query values, 404 unknown id, 401 without, with an
// expired or with a badly signed token, 403 missing role and cross-tenant requests (another
// tenant's run or execution too, CONTRACT.md's "forbidden (other tenant)"), 413 oversize and
// 423 suspended tenant.
func TestServer_Endpoints_statusMatrix(t *testing.T) {
	const maxBody = 4096
	f := newFixture(t, true, func(c *api.Config) { c.MaxBodyBytes = maxBody })
	exp := time.Now().Add(time.Hour).Unix()
	admin := f.as(mintToken(t, "ops", "admin"))
	operator := f.as(mintToken(t, "ops", "operator"))
	acme := f.as(mintToken(t, "acme", "tenant"))
	globex := f.as(mintToken(t, "globex", "tenant"))
	frozen := f.as(mintToken(t, "frozen", "tenant"))
	viewer := f.as(rawToken(t, testSecret, jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "v", "roles": []string{"viewer"}, "exp": exp}))
	anon := f.as("")
	expired := f.as(rawToken(t, testSecret, jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "v", "roles": []string{"admin"},
		"exp": time.Now().Add(-time.Minute).Unix()}))
	badSig := f.as(rawToken(t, []byte("not-the-secret-0123456789"), jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "v",
		"roles": []string{"admin"}, "exp": exp}))

	admin.putPipeline(threeStep)
	admin.putPipeline(veryLong)
	admin.call("PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, http.StatusOK, nil)
	done := acme.waitRun(acme.submit(`{"pipeline":"three","input":{"name":"m"}}`).SharedRunID, isFinal)
	if done.Status != "succeeded" {
		t.Fatalf("setup run = %+v", done)
	}
	live := acme.submit(`{"pipeline":"verylong"}`).SharedRunID
	acme.waitRun(live, func(r httpapi.Run) bool { return r.Status == "running" })
	frozenRun := frozen.submit(`{"pipeline":"verylong"}`).SharedRunID
	frozen.waitRun(frozenRun, func(r httpapi.Run) bool { return r.Status == "running" })
	frozen.call("POST", "/v1/runs/"+frozenRun+"/pause", "", http.StatusOK, nil)
	admin.call("POST", "/v1/tenants/frozen/suspend", "", http.StatusOK, nil)
	var insts httpapi.InstanceList
	operator.call("GET", "/v1/instances", "", http.StatusOK, &insts)
	if len(insts.Instances) == 0 {
		t.Fatal("no instance")
	}
	inst := insts.Instances[0].RuntimeInstanceID

	runP, liveP, execP := "/v1/runs/"+done.SharedRunID, "/v1/runs/"+live, "/v1/executions/"+done.ExecutionID
	endpoints := []endpoint{
		{"POST", "/v1/runs"}, {"GET", "/v1/runs"}, {"GET", runP}, {"POST", liveP + "/cancel"}, {"POST", liveP + "/pause"},
		{"POST", liveP + "/resume"}, {"GET", runP + "/events"}, {"POST", "/v1/sessions/s1/invoke"},
		{"GET", "/v1/instances"}, {"POST", "/v1/instances/" + inst + "/pause"}, {"POST", "/v1/instances/" + inst + "/resume"},
		{"POST", "/v1/instances/" + inst + "/drain"}, {"POST", "/v1/queue/drain"},
		{"GET", "/v1/tenants"}, {"GET", "/v1/tenants/acme"}, {"PUT", "/v1/tenants/acme"}, {"POST", "/v1/tenants/spare/suspend"},
		{"POST", "/v1/tenants/spare/resume"}, {"GET", "/v1/tenants/acme/usage"},
		{"GET", execP + "/ledger"}, {"GET", execP + "/trace"}, {"POST", execP + "/replay"},
		{"PUT", "/v1/pipelines/three"}, {"GET", "/v1/pipelines"}, {"GET", "/v1/pipelines/three"},
	}
	big := `{"pipeline":"three","input":{"x":"` + strings.Repeat("a", maxBody) + `"}}`
	var rows []matrixRow
	for _, ep := range endpoints {
		id := ep.method + " " + ep.path
		rows = append(rows,
			matrixRow{"401 no token " + id, anon, ep.method, ep.path, "", 401, httpapi.CodeUnauthenticated},
			matrixRow{"401 expired " + id, expired, ep.method, ep.path, "", 401, httpapi.CodeUnauthenticated},
			matrixRow{"401 bad signature " + id, badSig, ep.method, ep.path, "", 401, httpapi.CodeUnauthenticated},
			matrixRow{"413 " + id, admin, ep.method, ep.path, big, 413, httpapi.CodeRequestTooLarge},
		)
	}
	const (
		malformed = `{"pipeline":`
		unknown   = `{"pipeline":"three","bogus":1}`
		bodyField = `{"bogus":1}`
	)
	rows = append(rows, []matrixRow{
		// POST /v1/runs
		{"submit", acme, "POST", "/v1/runs", `{"pipeline":"three","input":{"name":"x"}}`, 202, ""},
		{"submit malformed", acme, "POST", "/v1/runs", malformed, 400, httpapi.CodeBadRequest},
		{"submit unknown field", acme, "POST", "/v1/runs", unknown, 400, httpapi.CodeBadRequest},
		{"submit unknown pipeline", acme, "POST", "/v1/runs", `{"pipeline":"nope"}`, 404, httpapi.CodeUnknownPipeline},
		{"submit cross-tenant", globex, "POST", "/v1/runs", `{"pipeline":"three","tenant_id":"acme"}`, 403, httpapi.CodeForbidden},
		{"submit missing role", viewer, "POST", "/v1/runs", `{"pipeline":"three"}`, 403, httpapi.CodeForbidden},
		{"submit suspended", frozen, "POST", "/v1/runs", `{"pipeline":"three"}`, 423, httpapi.CodeTenantSuspended},
		// GET /v1/runs
		{"list", acme, "GET", "/v1/runs", "", 200, ""},
		{"list bad status", acme, "GET", "/v1/runs?status=weird", "", 400, httpapi.CodeBadRequest},
		{"list bad limit", acme, "GET", "/v1/runs?limit=-1", "", 400, httpapi.CodeBadRequest},
		{"list cross-tenant", globex, "GET", "/v1/runs?tenant_id=acme", "", 403, httpapi.CodeForbidden},
		{"list missing role", viewer, "GET", "/v1/runs", "", 403, httpapi.CodeForbidden},
		// GET /v1/runs/{id}
		{"get run", acme, "GET", runP, "", 200, ""},
		{"get unknown run", acme, "GET", "/v1/runs/run-nope", "", 404, httpapi.CodeNotFound},
		{"get run cross-tenant", globex, "GET", runP, "", 403, httpapi.CodeForbidden},
		{"get run missing role", viewer, "GET", runP, "", 403, httpapi.CodeForbidden},
		// POST /v1/runs/{id}/pause|resume|cancel
		{"pause", acme, "POST", liveP + "/pause", "", 200, ""},
		{"resume", acme, "POST", liveP + "/resume", "{}", 200, ""},
		{"control malformed body", acme, "POST", liveP + "/pause", malformed, 400, httpapi.CodeBadRequest},
		{"control unknown field", acme, "POST", liveP + "/cancel", bodyField, 400, httpapi.CodeBadRequest},
		{"control unknown run", acme, "POST", "/v1/runs/run-nope/pause", "", 404, httpapi.CodeNotFound},
		{"control cross-tenant", globex, "POST", liveP + "/cancel", "", 403, httpapi.CodeForbidden},
		{"control missing role", viewer, "POST", liveP + "/pause", "", 403, httpapi.CodeForbidden},
		{"control finished run", acme, "POST", runP + "/cancel", "", 409, httpapi.CodeNotRunning},
		{"resume suspended", frozen, "POST", "/v1/runs/" + frozenRun + "/resume", "", 423, httpapi.CodeTenantSuspended},
		// GET /v1/runs/{id}/events
		{"events", acme, "GET", runP + "/events", "", 200, ""},
		{"events bad last event id", acme, "GET", runP + "/events?last_event_id=-3", "", 400, httpapi.CodeBadRequest},
		{"events unknown run", acme, "GET", "/v1/runs/run-nope/events", "", 404, httpapi.CodeNotFound},
		{"events cross-tenant", globex, "GET", runP + "/events", "", 403, httpapi.CodeForbidden},
		{"events missing role", viewer, "GET", runP + "/events", "", 403, httpapi.CodeForbidden},
		// POST /v1/sessions/{session_id}/invoke
		{"invoke", acme, "POST", "/v1/sessions/s1/invoke", `{"pipeline":"three","input":{"name":"i"}}`, 200, ""},
		{"invoke malformed", acme, "POST", "/v1/sessions/s1/invoke", malformed, 400, httpapi.CodeBadRequest},
		{"invoke unknown field", acme, "POST", "/v1/sessions/s1/invoke", unknown, 400, httpapi.CodeBadRequest},
		{"invoke unknown pipeline", acme, "POST", "/v1/sessions/s1/invoke", `{"pipeline":"nope"}`, 404, httpapi.CodeUnknownPipeline},
		{"invoke cross-tenant", globex, "POST", "/v1/sessions/s1/invoke", `{"pipeline":"three","tenant_id":"acme"}`, 403, httpapi.CodeForbidden},
		{"invoke missing role", viewer, "POST", "/v1/sessions/s1/invoke", `{"pipeline":"three"}`, 403, httpapi.CodeForbidden},
		{"invoke suspended", frozen, "POST", "/v1/sessions/s1/invoke", `{"pipeline":"three"}`, 423, httpapi.CodeTenantSuspended},
		// GET /v1/instances
		{"instances", operator, "GET", "/v1/instances", "", 200, ""},
		{"instances missing role", acme, "GET", "/v1/instances", "", 403, httpapi.CodeForbidden},
		// POST /v1/instances/{id}/pause|resume|drain
		{"instance malformed body", operator, "POST", "/v1/instances/" + inst + "/pause", malformed, 400, httpapi.CodeBadRequest},
		{"instance unknown field", operator, "POST", "/v1/instances/" + inst + "/drain", bodyField, 400, httpapi.CodeBadRequest},
		{"instance unknown", operator, "POST", "/v1/instances/nope/pause", "", 404, httpapi.CodeNotFound},
		{"instance missing role", acme, "POST", "/v1/instances/" + inst + "/pause", "", 403, httpapi.CodeForbidden},
		// POST /v1/queue/drain
		{"queue drain", operator, "POST", "/v1/queue/drain", "", 200, ""},
		{"queue drain unknown field", operator, "POST", "/v1/queue/drain", bodyField, 400, httpapi.CodeBadRequest},
		{"queue drain missing role", acme, "POST", "/v1/queue/drain", "", 403, httpapi.CodeForbidden},
		// GET /v1/tenants, GET|PUT /v1/tenants/{id}
		{"tenants", operator, "GET", "/v1/tenants", "", 200, ""},
		{"tenants missing role", acme, "GET", "/v1/tenants", "", 403, httpapi.CodeForbidden},
		{"tenant own", acme, "GET", "/v1/tenants/acme", "", 200, ""},
		{"tenant never put is 404", admin, "GET", "/v1/tenants/nobody", "", 404, httpapi.CodeNotFound},
		{"tenant cross-tenant", globex, "GET", "/v1/tenants/acme", "", 403, httpapi.CodeForbidden},
		{"tenant missing role", viewer, "GET", "/v1/tenants/acme", "", 403, httpapi.CodeForbidden},
		{"put tenant", admin, "PUT", "/v1/tenants/spare", `{"isolation_mode":"shared"}`, 200, ""},
		{"put tenant malformed", admin, "PUT", "/v1/tenants/spare", `{"isolation_mode":`, 400, httpapi.CodeBadRequest},
		{"put tenant unknown field", admin, "PUT", "/v1/tenants/spare", bodyField, 400, httpapi.CodeBadRequest},
		{"put tenant invalid", admin, "PUT", "/v1/tenants/spare", `{"isolation_mode":"solo"}`, 400, httpapi.CodeInvalidSettings},
		{"put tenant missing role", operator, "PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, 403, httpapi.CodeForbidden},
		{"put tenant as tenant", acme, "PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, 403, httpapi.CodeForbidden},
		// POST /v1/tenants/{id}/suspend|resume
		{"suspend", admin, "POST", "/v1/tenants/spare/suspend", "", 200, ""},
		{"resume tenant", admin, "POST", "/v1/tenants/spare/resume", "", 200, ""},
		{"suspend unknown field", admin, "POST", "/v1/tenants/spare/suspend", bodyField, 400, httpapi.CodeBadRequest},
		{"suspend missing role", operator, "POST", "/v1/tenants/spare/suspend", "", 403, httpapi.CodeForbidden},
		{"suspend as tenant", acme, "POST", "/v1/tenants/acme/suspend", "", 403, httpapi.CodeForbidden},
		// GET /v1/tenants/{id}/usage
		{"usage", acme, "GET", "/v1/tenants/acme/usage", "", 200, ""},
		{"usage bad from", acme, "GET", "/v1/tenants/acme/usage?from=yesterday", "", 400, httpapi.CodeBadRequest},
		{"usage cross-tenant", globex, "GET", "/v1/tenants/acme/usage", "", 403, httpapi.CodeForbidden},
		{"usage missing role", viewer, "GET", "/v1/tenants/acme/usage", "", 403, httpapi.CodeForbidden},
		// /v1/executions/{id}/ledger|trace|replay
		{"ledger", acme, "GET", execP + "/ledger", "", 200, ""},
		{"trace", acme, "GET", execP + "/trace", "", 200, ""},
		{"replay", acme, "POST", execP + "/replay", "", 200, ""},
		{"replay unknown field", acme, "POST", execP + "/replay", bodyField, 400, httpapi.CodeBadRequest},
		{"ledger unknown", acme, "GET", "/v1/executions/nope/ledger", "", 404, httpapi.CodeNotFound},
		{"trace unknown", acme, "GET", "/v1/executions/nope/trace", "", 404, httpapi.CodeNotFound},
		{"replay unknown", acme, "POST", "/v1/executions/nope/replay", "", 404, httpapi.CodeNotFound},
		{"ledger cross-tenant", globex, "GET", execP + "/ledger", "", 403, httpapi.CodeForbidden},
		{"trace cross-tenant", globex, "GET", execP + "/trace", "", 403, httpapi.CodeForbidden},
		{"replay cross-tenant", globex, "POST", execP + "/replay", "", 403, httpapi.CodeForbidden},
		{"ledger missing role", viewer, "GET", execP + "/ledger", "", 403, httpapi.CodeForbidden},
		// PUT /v1/pipelines/{key}, GET /v1/pipelines[/{key}]
		{"put pipeline", admin, "PUT", "/v1/pipelines/three", threeStep, 200, ""},
		{"put pipeline malformed", admin, "PUT", "/v1/pipelines/three", "key: [", 400, httpapi.CodeInvalidPipeline},
		{"put pipeline unknown field", admin, "PUT", "/v1/pipelines/j", `{"key":"j","steps":[],"bogus":1}`, 400, httpapi.CodeInvalidPipeline},
		{"put pipeline missing role", operator, "PUT", "/v1/pipelines/three", threeStep, 403, httpapi.CodeForbidden},
		{"pipelines", acme, "GET", "/v1/pipelines", "", 200, ""},
		{"pipelines missing role", viewer, "GET", "/v1/pipelines", "", 403, httpapi.CodeForbidden},
		{"pipeline", acme, "GET", "/v1/pipelines/three", "", 200, ""},
		{"pipeline unknown", acme, "GET", "/v1/pipelines/nope", "", 404, httpapi.CodeNotFound},
		{"pipeline missing role", viewer, "GET", "/v1/pipelines/three", "", 403, httpapi.CodeForbidden},
		// Last, as they change what the earlier rows rely on.
		{"cancel", acme, "POST", liveP + "/cancel", "", 200, ""},
		{"cancel suspended tenant's run", frozen, "POST", "/v1/runs/" + frozenRun + "/cancel", "", 200, ""},
		{"instance pause", operator, "POST", "/v1/instances/" + inst + "/pause", "", 200, ""},
		{"instance resume", operator, "POST", "/v1/instances/" + inst + "/resume", "", 200, ""},
		{"instance drain", operator, "POST", "/v1/instances/" + inst + "/drain", "", 200, ""},
	}...)

	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			code, body := tt.who.do(tt.method, tt.path, tt.body)
			if code != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, code, body, tt.status)
			}
			if code < 300 {
				return
			}
			var eb httpapi.ErrorBody
			if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Message == "" || (tt.code != "" && eb.Error.Code != tt.code) {
				t.Fatalf("error body %s (%v), want code %q", body, err, tt.code)
			}
		})
	}
}
