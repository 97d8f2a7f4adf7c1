package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
)

func TestServer_Runs_happyPath(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)

	sr := f.submit(`{"pipeline":"three","tenant_id":"acme","input":{"name":"x"},"correlation_id":"c1"}`)
	run := f.waitRun(sr.SharedRunID, isFinal)

	t.Run("get", func(t *testing.T) {
		if run.Status != "succeeded" || run.TenantID != "acme" || run.Pipeline != "three" || run.PipelineHash == "" {
			t.Fatalf("run = %+v", run)
		}
		if run.ExecutionID == "" || run.CreatedAt.IsZero() || run.CreatedAt.Location().String() != "UTC" {
			t.Fatalf("run ids/times = %+v", run)
		}
		if string(run.Input) != `{"name":"x"}` || len(run.Output) == 0 {
			t.Fatalf("input %s output %s", run.Input, run.Output)
		}
		if len(run.Steps) != 3 || run.Steps[0].ID != "a" || run.Steps[0].Status != "succeeded" || run.Steps[0].StartedAt == nil {
			t.Fatalf("steps = %+v", run.Steps)
		}
	})
	t.Run("raw field names", func(t *testing.T) {
		var m map[string]any
		f.call("GET", "/v1/runs/"+sr.SharedRunID, "", http.StatusOK, &m)
		for _, k := range []string{"shared_run_id", "tenant_id", "pipeline", "pipeline_hash", "status",
			"assigned_runtime_instance_id", "pump_runtime_instance_id", "execution_id", "local_run_id", "attempts",
			"failure_reason", "input", "output", "created_at", "updated_at", "steps"} {
			if _, ok := m[k]; !ok {
				t.Errorf("run field %q missing", k)
			}
		}
	})
	t.Run("list", func(t *testing.T) {
		tests := []struct {
			query string
			want  int
		}{
			{"", 1},
			{"?tenant_id=acme", 1},
			{"?tenant_id=other", 0},
			{"?tenant_id=acme&status=succeeded", 1},
			{"?status=failed", 0},
		}
		for _, tt := range tests {
			t.Run(tt.query, func(t *testing.T) {
				var l httpapi.RunList
				f.call("GET", "/v1/runs"+tt.query, "", http.StatusOK, &l)
				if len(l.Runs) != tt.want {
					t.Fatalf("runs = %d, want %d", len(l.Runs), tt.want)
				}
			})
		}
	})
	t.Run("idempotent submit", func(t *testing.T) {
		body := `{"pipeline":"three","tenant_id":"acme","input":{"name":"y"},"idempotency_key":"k1"}`
		a := f.submit(body)
		b := f.submit(body)
		if a.SharedRunID != b.SharedRunID {
			t.Fatalf("idempotent submit gave %s and %s", a.SharedRunID, b.SharedRunID)
		}
		f.waitRun(a.SharedRunID, isFinal)
	})
	t.Run("default tenant", func(t *testing.T) {
		s := f.submit(`{"pipeline":"three","input":{"name":"d"}}`)
		r := f.waitRun(s.SharedRunID, isFinal)
		if r.TenantID != api.DefaultTenant {
			t.Fatalf("tenant = %q", r.TenantID)
		}
	})
	t.Run("events", func(t *testing.T) {
		evs := f.openStream("GET", "/v1/runs/"+sr.SharedRunID+"/events", "").readAll()
		if len(evs) == 0 || evs[len(evs)-1].Kind != "run_succeeded" {
			t.Fatalf("events = %+v", evs)
		}
		for i, ev := range evs {
			if ev.ID != ev.Data.Seq || ev.Kind != ev.Data.Kind || ev.Data.SharedRunID != sr.SharedRunID {
				t.Fatalf("event %d = %+v", i, ev)
			}
		}
	})
	t.Run("ledger", func(t *testing.T) {
		for _, id := range []string{run.ExecutionID, run.SharedRunID} {
			var l httpapi.Ledger
			f.call("GET", "/v1/executions/"+id+"/ledger", "", http.StatusOK, &l)
			if l.ExecutionID != run.ExecutionID || len(l.Entries) == 0 || l.Entries[len(l.Entries)-1].Kind != "run_succeeded" {
				t.Fatalf("ledger = %+v", l)
			}
		}
	})
	t.Run("trace", func(t *testing.T) {
		var tr httpapi.Trace
		f.call("GET", "/v1/executions/"+run.ExecutionID+"/trace", "", http.StatusOK, &tr)
		if tr.ExecutionID != run.ExecutionID || len(tr.Spans) == 0 || tr.Spans[0].Kind == "" {
			t.Fatalf("trace = %+v", tr)
		}
	})
	t.Run("replay", func(t *testing.T) {
		for _, id := range []string{run.ExecutionID, run.SharedRunID} {
			var rp httpapi.Replay
			f.call("POST", "/v1/executions/"+id+"/replay", "", http.StatusOK, &rp)
			if rp.ExecutionID != run.ExecutionID || rp.Diverged || rp.Divergences == nil {
				t.Fatalf("replay = %+v", rp)
			}
		}
	})
}

func TestServer_Pipelines_happyPath(t *testing.T) {
	f := newFixture(t, false, nil)
	var p httpapi.Pipeline
	f.call("PUT", "/v1/pipelines/three", threeStep, http.StatusOK, &p)
	if p.Key != "three" || p.Hash == "" || p.CreatedAt.IsZero() || p.Source != threeStep {
		t.Fatalf("put = %+v", p)
	}
	jsonDoc := `{"key":"j","steps":[{"id":"a","uses":"echo","with":{"value":"v"}}]}`
	f.call("PUT", "/v1/pipelines/j", jsonDoc, http.StatusOK, nil)
	var l httpapi.PipelineList
	f.call("GET", "/v1/pipelines", "", http.StatusOK, &l)
	if len(l.Pipelines) != 2 {
		t.Fatalf("list = %+v", l)
	}
	var g httpapi.Pipeline
	f.call("GET", "/v1/pipelines/j", "", http.StatusOK, &g)
	if g.Key != "j" || g.Source != jsonDoc {
		t.Fatalf("get = %+v", g)
	}
}

func TestServer_Tenants_happyPath(t *testing.T) {
	f := newFixture(t, false, nil)
	var put httpapi.Tenant
	f.call("PUT", "/v1/tenants/acme", `{"isolation_mode":"dedicated","max_runtime_instances":2,"worker_count_per_instance":2,"max_concurrent_runs_per_instance":2}`,
		http.StatusOK, &put)
	if put.TenantID != "acme" || put.IsolationMode != "dedicated" || put.MaxRuntimeInstances != 2 {
		t.Fatalf("put = %+v", put)
	}
	var got httpapi.Tenant
	f.call("GET", "/v1/tenants/acme", "", http.StatusOK, &got)
	if got != put {
		t.Fatalf("get = %+v, want %+v", got, put)
	}
	// A tenant that was never put is not found (it still submits, as shared).
	f.callErr("GET", "/v1/tenants/nobody", "", http.StatusNotFound, httpapi.CodeNotFound)
	var l httpapi.TenantList
	f.call("GET", "/v1/tenants", "", http.StatusOK, &l)
	if len(l.Tenants) != 1 || l.Tenants[0].TenantID != "acme" {
		t.Fatalf("list = %+v", l)
	}
	var s httpapi.Tenant
	f.call("POST", "/v1/tenants/acme/suspend", "", http.StatusOK, &s)
	if !s.Suspended {
		t.Fatal("suspend did not suspend")
	}
	f.call("POST", "/v1/tenants/acme/resume", "", http.StatusOK, &s)
	if s.Suspended {
		t.Fatal("resume did not resume")
	}
	var raw map[string]any
	f.call("GET", "/v1/tenants/acme", "", http.StatusOK, &raw)
	for _, k := range []string{"tenant_id", "tenant_group_id", "isolation_mode", "prefer_dedicated_capacity",
		"allow_shared_fallback", "runtime_instance_id_prefix", "max_runtime_instances", "worker_count_per_instance",
		"max_concurrent_runs_per_instance", "local_queue_capacity", "suspended"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("tenant field %q missing", k)
		}
	}
}

func TestServer_Instances_happyPath(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	sr := f.submit(`{"pipeline":"three","tenant_id":"acme","input":{"name":"x"}}`)
	f.waitRun(sr.SharedRunID, isFinal)
	var l httpapi.InstanceList
	f.call("GET", "/v1/instances", "", http.StatusOK, &l)
	if len(l.Instances) == 0 {
		t.Fatal("no instances")
	}
	id := l.Instances[0].RuntimeInstanceID
	var raw map[string]any
	b := f.call("GET", "/v1/instances", "", http.StatusOK, nil)
	var wrapped struct{ Instances []map[string]any }
	if err := json.Unmarshal(b, &wrapped); err != nil {
		t.Fatal(err)
	}
	raw = wrapped.Instances[0]
	for _, k := range []string{"runtime_instance_id", "control_plane_id", "host_id", "provider_name", "status",
		"available_run_slots", "is_queue_paused", "can_accept_run", "last_heartbeat_at", "metadata"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("instance field %q missing", k)
		}
	}
	tests := []struct {
		op     string
		paused bool
	}{
		{"pause", true},
		{"resume", false},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			var in httpapi.Instance
			f.call("POST", "/v1/instances/"+id+"/"+tt.op, "", http.StatusOK, &in)
			if in.RuntimeInstanceID != id || in.IsQueuePaused != tt.paused {
				t.Fatalf("%s: instance = %+v", tt.op, in)
			}
		})
	}
	t.Run("drain", func(t *testing.T) {
		var in httpapi.Instance
		f.call("POST", "/v1/instances/"+id+"/drain", "", http.StatusOK, &in)
		if in.RuntimeInstanceID != id {
			t.Fatalf("drain: instance = %+v", in)
		}
	})
	t.Run("queue drain", func(t *testing.T) {
		var d httpapi.DrainResponse
		f.call("POST", "/v1/queue/drain", "", http.StatusOK, &d)
		if d.Claimed < 0 {
			t.Fatalf("claimed = %d", d.Claimed)
		}
	})
}

func TestServer_Health_endpoints(t *testing.T) {
	ready := false
	f := newFixture(t, false, func(c *api.Config) { c.Ready = func() bool { return ready } })
	f.call("GET", "/healthz", "", http.StatusOK, nil)
	f.callErr("GET", "/readyz", "", http.StatusServiceUnavailable, "not_ready")
	ready = true
	f.call("GET", "/readyz", "", http.StatusOK, nil)
	b := f.call("GET", "/metrics", "", http.StatusOK, nil)
	if !strings.Contains(string(b), "dair_") {
		t.Fatalf("metrics lack dair_ series: %.300s", b)
	}
}

func TestServer_ControlRun_pauseResumeCancel(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(longStep)
	sr := f.submit(`{"pipeline":"long","tenant_id":"acme"}`)
	f.waitRun(sr.SharedRunID, func(r httpapi.Run) bool { return r.Status == "running" })
	var r httpapi.Run
	f.call("POST", "/v1/runs/"+sr.SharedRunID+"/pause", "", http.StatusOK, &r)
	if r.Status != "paused" {
		t.Fatalf("after pause status = %s", r.Status)
	}
	f.call("POST", "/v1/runs/"+sr.SharedRunID+"/resume", "", http.StatusOK, &r)
	if r.Status == "paused" {
		t.Fatalf("after resume status = %s", r.Status)
	}
	f.call("POST", "/v1/runs/"+sr.SharedRunID+"/cancel", "", http.StatusOK, &r)
	if r.Status != "cancelled" {
		t.Fatalf("after cancel status = %s", r.Status)
	}
	f.callErr("POST", "/v1/runs/"+sr.SharedRunID+"/cancel", "", http.StatusConflict, httpapi.CodeNotRunning)
}
