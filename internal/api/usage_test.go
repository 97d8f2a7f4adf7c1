package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// waitUsage polls the usage of tenant until cond holds (events are written off the hot path).
func (f *fixture) waitUsage(tenant, query string, cond func(httpapi.UsageReport) bool) httpapi.UsageReport {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rep httpapi.UsageReport
		f.call("GET", "/v1/tenants/"+tenant+"/usage"+query, "", http.StatusOK, &rep)
		if cond(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("usage of %s: condition not met; last %+v", tenant, rep)
		}
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
}

func TestServer_Usage_totalsEqualStepSum(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	from := time.Now().UTC().Add(-time.Minute)
	sr := f.submit(`{"pipeline":"three","tenant_id":"meter","input":{"name":"x"}}`)
	run := f.waitRun(sr.SharedRunID, isFinal)
	if run.Status != "succeeded" {
		t.Fatalf("run = %+v", run)
	}
	q := "?from=" + url.QueryEscape(from.Format(time.RFC3339)) + "&to=" + url.QueryEscape(time.Now().UTC().Add(time.Minute).Format(time.RFC3339))
	rep := f.waitUsage("meter", q, func(r httpapi.UsageReport) bool { return r.Totals.Runs == 1 && r.Totals.Steps == 3 })
	if rep.TenantID != "meter" || rep.From == nil || rep.To == nil {
		t.Fatalf("report header = %+v", rep)
	}
	var sum httpapi.UsageTotals
	for _, ev := range rep.Events {
		if ev.SharedRunID != sr.SharedRunID || ev.TenantID != "meter" {
			t.Fatalf("foreign event %+v", ev)
		}
		if ev.Kind == "step" {
			sum.Steps++
			sum.DurationMS += ev.DurationMS
			sum.Attempts += int64(ev.Attempts)
			sum.PromptTokens += ev.PromptTokens
			sum.CompletionTokens += ev.CompletionTokens
		}
	}
	sum.Runs = 1
	if sum != rep.Totals {
		t.Fatalf("totals = %+v, want the sum of the steps %+v", rep.Totals, sum)
	}
	if rep.Totals.Attempts != 3 {
		t.Fatalf("attempts = %d, want 3 (one per step)", rep.Totals.Attempts)
	}

	// A window before the run holds nothing.
	past := "?to=" + url.QueryEscape(from.Format(time.RFC3339))
	var empty httpapi.UsageReport
	f.call("GET", "/v1/tenants/meter/usage"+past, "", http.StatusOK, &empty)
	if len(empty.Events) != 0 || empty.Totals != (httpapi.UsageTotals{}) {
		t.Fatalf("past window = %+v", empty)
	}
}

func TestServer_Usage_authorization(t *testing.T) {
	f := newFixture(t, true, nil)
	tests := []struct {
		name   string
		token  string
		tenant string
		status int
	}{
		{"own tenant", mintToken(t, "t1", auth.RoleTenant), "t1", http.StatusOK},
		{"other tenant", mintToken(t, "t1", auth.RoleTenant), "t2", http.StatusForbidden},
		{"operator any tenant", mintToken(t, "ops", auth.RoleOperator), "t2", http.StatusOK},
		{"admin any tenant", mintToken(t, "root", auth.RoleAdmin), "t2", http.StatusOK},
		{"no token", "", "t1", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := f.as(tt.token).do("GET", "/v1/tenants/"+tt.tenant+"/usage", "")
			if code != tt.status {
				t.Fatalf("status = %d %s, want %d", code, b, tt.status)
			}
		})
	}
}

func TestServer_Usage_badTimes(t *testing.T) {
	f := newFixture(t, false, nil)
	tests := []struct{ name, query string }{
		{"from not rfc3339", "?from=yesterday"},
		{"to not rfc3339", "?to=2030-01-01"},
		{"to before from", "?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.callErr("GET", "/v1/tenants/t1/usage"+tt.query, "", http.StatusBadRequest, httpapi.CodeBadRequest)
		})
	}
}

// neverScaler is a scale-out provider that never creates capacity.
type neverScaler struct{}

func (neverScaler) Name() string { return "never" }

func (neverScaler) ScaleOut(context.Context, *messages.ScaleOutRequest) providers.ScaleOutResult {
	return providers.ScaleOutResult{Result: providers.Failure("never", "", providers.OpScaleOut, providers.ReasonHostCreateFailed, true)}
}

func TestServer_Submit_lifecycleErrors(t *testing.T) {
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	n, err := actors.Start(context.Background(), actors.Config{NodeID: "api-lifecycle", Store: st, PumpInterval: 10 * time.Millisecond,
		Providers: []providers.Provider{neverScaler{}}, ScaleOutProvider: "never",
		Lifecycle: lifecycle.Config{ColdStartWait: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	srv := httptest.NewServer(api.New(api.Config{Node: n}))
	t.Cleanup(srv.Close)
	f := &fixture{t: t, node: n, srv: srv}
	f.putPipeline(threeStep)
	f.call("PUT", "/v1/tenants/cold", `{"isolation_mode":"dedicated"}`, http.StatusOK, nil)
	at := time.Now().Add(-2 * time.Hour).UnixNano()
	if err := st.PutTenantState(context.Background(), &messages.TenantState{TenantId: "cold", EnsuredAt: at, LastSeenAt: at, ScaledToZeroAt: at}); err != nil {
		t.Fatal(err)
	}
	f.callErr("POST", "/v1/runs", `{"pipeline":"three","tenant_id":"cold"}`, http.StatusServiceUnavailable, httpapi.CodeNoCapacity)
	f.call("POST", "/v1/tenants/cold/suspend", "", http.StatusOK, nil)
	f.callErr("POST", "/v1/runs", `{"pipeline":"three","tenant_id":"cold"}`, http.StatusLocked, httpapi.CodeTenantSuspended)
}
