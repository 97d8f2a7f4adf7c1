package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dairuntime/dair/httpapi"
)

func TestServer_Auth_authenticationAndRoles(t *testing.T) {
	f := newFixture(t, true, nil)
	admin := f.as(mintToken(t, "ops", "admin"))
	operator := f.as(mintToken(t, "ops", "operator"))
	acme := f.as(mintToken(t, "acme", "tenant"))
	globex := f.as(mintToken(t, "globex", "tenant"))
	exp := time.Now().Add(time.Hour).Unix()
	viewer := f.as(rawToken(t, testSecret, jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "v", "roles": []string{"viewer"}, "exp": exp}))
	expired := f.as(rawToken(t, testSecret, jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "v", "roles": []string{"tenant"},
		"exp": time.Now().Add(-time.Hour).Unix()}))
	badSig := f.as(rawToken(t, []byte("wrong-secret"), jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "v",
		"roles": []string{"tenant"}, "exp": exp}))

	admin.putPipeline(threeStep)
	admin.call("PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, http.StatusOK, nil)
	acmeRun := acme.submit(`{"pipeline":"three","input":{"name":"a"}}`)
	run := acme.waitRun(acmeRun.SharedRunID, isFinal)
	if run.TenantID != "acme" {
		t.Fatalf("run tenant = %q, want the token's", run.TenantID)
	}
	stored, err := f.node.GetRun(context.Background(), acmeRun.SharedRunID)
	if err != nil {
		t.Fatal(err)
	}
	if sn := stored.Snapshot; sn.GetTenantId() != "acme" || sn.GetOrgId() != "acme" || sn.GetUserId() != "user-acme" ||
		sn.GetRequestedBy() != "user-acme" || sn.GetSource() != "http" || len(sn.GetRoles()) != 1 {
		t.Fatalf("snapshot = %+v", sn)
	}
	globexRun := globex.submit(`{"pipeline":"three","tenant_id":"globex","input":{"name":"g"}}`)
	globex.waitRun(globexRun.SharedRunID, isFinal)

	runPath := "/v1/runs/" + acmeRun.SharedRunID
	tests := []struct {
		name         string
		who          *fixture
		method, path string
		body         string
		status       int
	}{
		{"no token", f, "GET", runPath, "", 401},
		{"expired token", expired, "GET", runPath, "", 401},
		{"bad signature", badSig, "GET", runPath, "", 401},
		{"garbage token", f.as("abc.def.ghi"), "GET", runPath, "", 401},
		{"health needs no token", f, "GET", "/healthz", "", 200},
		{"own run", acme, "GET", runPath, "", 200},
		{"own events", acme, "GET", "/v1/runs/" + acmeRun.SharedRunID + "/events", "", 200},
		{"own ledger", acme, "GET", "/v1/executions/" + run.ExecutionID + "/ledger", "", 200},
		{"cross-tenant run", globex, "GET", runPath, "", 403},
		{"cross-tenant events", globex, "GET", runPath + "/events", "", 403},
		{"cross-tenant cancel", globex, "POST", runPath + "/cancel", "", 403},
		{"cross-tenant ledger", globex, "GET", "/v1/executions/" + run.ExecutionID + "/ledger", "", 403},
		{"cross-tenant trace", globex, "GET", "/v1/executions/" + run.ExecutionID + "/trace", "", 403},
		{"cross-tenant replay", globex, "POST", "/v1/executions/" + run.ExecutionID + "/replay", "", 403},
		{"cross-tenant list", globex, "GET", "/v1/runs?tenant_id=acme", "", 403},
		{"cross-tenant submit", globex, "POST", "/v1/runs", `{"pipeline":"three","tenant_id":"acme"}`, 403},
		{"cross-tenant invoke", globex, "POST", "/v1/sessions/s1/invoke", `{"pipeline":"three","tenant_id":"acme"}`, 403},
		{"cross-tenant tenant get", globex, "GET", "/v1/tenants/acme", "", 403},
		{"own tenant get", acme, "GET", "/v1/tenants/acme", "", 200},
		{"tenant lists instances", acme, "GET", "/v1/instances", "", 403},
		{"tenant drains queue", acme, "POST", "/v1/queue/drain", "", 403},
		{"tenant puts pipeline", acme, "PUT", "/v1/pipelines/three", threeStep, 403},
		{"tenant puts tenant", acme, "PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, 403},
		{"tenant suspends", acme, "POST", "/v1/tenants/acme/suspend", "", 403},
		{"tenant lists tenants", acme, "GET", "/v1/tenants", "", 403},
		{"tenant lists pipelines", acme, "GET", "/v1/pipelines", "", 200},
		{"role-less submit", viewer, "POST", "/v1/runs", `{"pipeline":"three"}`, 403},
		{"role-less get", viewer, "GET", runPath, "", 403},
		{"role-less list", viewer, "GET", "/v1/runs", "", 403},
		{"operator any run", operator, "GET", runPath, "", 200},
		{"operator instances", operator, "GET", "/v1/instances", "", 200},
		{"operator queue drain", operator, "POST", "/v1/queue/drain", "", 200},
		{"operator puts pipeline", operator, "PUT", "/v1/pipelines/three", threeStep, 403},
		{"operator puts tenant", operator, "PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, 403},
		{"admin puts tenant", admin, "PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, 200},
		{"admin lists tenants", admin, "GET", "/v1/tenants", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := tt.who.do(tt.method, tt.path, tt.body)
			if code != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, code, body, tt.status)
			}
		})
	}

	t.Run("tenant list is filtered to own tenant", func(t *testing.T) {
		var l httpapi.RunList
		acme.call("GET", "/v1/runs", "", http.StatusOK, &l)
		if len(l.Runs) != 1 || l.Runs[0].TenantID != "acme" {
			t.Fatalf("acme sees %+v", l.Runs)
		}
		operator.call("GET", "/v1/runs", "", http.StatusOK, &l)
		if len(l.Runs) != 2 {
			t.Fatalf("operator sees %d runs, want 2", len(l.Runs))
		}
	})
	t.Run("history by shared run id names the execution", func(t *testing.T) {
		var l httpapi.Ledger
		acme.call("GET", "/v1/executions/"+acmeRun.SharedRunID+"/ledger", "", http.StatusOK, &l)
		var tr httpapi.Trace
		acme.call("GET", "/v1/executions/"+acmeRun.SharedRunID+"/trace", "", http.StatusOK, &tr)
		if l.ExecutionID != run.ExecutionID || tr.ExecutionID != run.ExecutionID || len(l.Entries) == 0 {
			t.Fatalf("ledger names %q, trace %q (%d entries); want the run's execution %q", l.ExecutionID, tr.ExecutionID,
				len(l.Entries), run.ExecutionID)
		}
	})
	t.Run("401 body", func(t *testing.T) {
		f.callErr("GET", runPath, "", http.StatusUnauthorized, httpapi.CodeUnauthenticated)
	})
	t.Run("403 body", func(t *testing.T) {
		viewer.callErr("GET", runPath, "", http.StatusForbidden, httpapi.CodeForbidden)
	})
	t.Run("another tenant's run is forbidden", func(t *testing.T) {
		// CONTRACT.md: forbidden (other tenant) is 403; the message names nothing of the run's
		// owner, and an unknown id stays 404.
		other := globex.callErr("GET", runPath, "", http.StatusForbidden, httpapi.CodeForbidden)
		if want := "api: run \"" + acmeRun.SharedRunID + "\" belongs to another tenant"; other.Error.Message != want {
			t.Fatalf("message %q, want %q", other.Error.Message, want)
		}
		if strings.Contains(other.Error.Message, "acme") {
			t.Fatalf("message %q names the owner", other.Error.Message)
		}
		globex.callErr("GET", "/v1/runs/run-unknown", "", http.StatusNotFound, httpapi.CodeNotFound)
		for _, p := range []string{"/events", "/cancel"} {
			method := "GET"
			if p == "/cancel" {
				method = "POST"
			}
			globex.callErr(method, runPath+p, "", http.StatusForbidden, httpapi.CodeForbidden)
		}
		for _, p := range []string{"ledger", "trace", "replay"} {
			method := "GET"
			if p == "replay" {
				method = "POST"
			}
			ex := globex.callErr(method, "/v1/executions/"+run.ExecutionID+"/"+p, "", http.StatusForbidden, httpapi.CodeForbidden)
			if want := "api: execution \"" + run.ExecutionID + "\" belongs to another tenant"; ex.Error.Message != want {
				t.Fatalf("%s: message %q, want %q", p, ex.Error.Message, want)
			}
		}
	})
}

// TestServer_Auth_checkOrder: the checks come in the order docs/api.md gives: authentication
// (401) before a missing route, a wrong method or a malformed path; the body (400) before
// the role (403).
func TestServer_Auth_checkOrder(t *testing.T) {
	f := newFixture(t, true, nil)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/nope", ""},
		{"DELETE", "/v1/runs", ""},
		{"GET", "/v1/agents/echo/k/messages", ""},
		{"POST", "/v1/agents/echo//messages", `{"message":1}`},
		{"POST", "/v1/topics", `{"message":1}`},
	} {
		f.callErr(tc.method, tc.path, tc.body, http.StatusUnauthorized, httpapi.CodeUnauthenticated)
	}
	tenant := f.as(mintToken(t, "acme", "tenant"))
	for _, tc := range []struct{ method, path string }{
		{"PUT", "/v1/tenants/acme"},
		{"PUT", "/v1/pipelines/x"},
		{"POST", "/v1/pipelines/x/check"},
	} {
		tenant.callErr(tc.method, tc.path, `{bad`, http.StatusBadRequest, "")
	}
	tenant.callErr("PUT", "/v1/tenants/acme", `{"isolation_mode":"shared"}`, http.StatusForbidden, httpapi.CodeForbidden)
}
