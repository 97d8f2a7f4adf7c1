package api_test

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
)

// scrape returns the samples of /metrics whose series (name and labels) start with prefix.
func (f *fixture) scrape(prefix string) map[string]float64 {
	f.t.Helper()
	b := f.call("GET", "/metrics", "", http.StatusOK, nil)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			f.t.Fatalf("bad sample line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// nonZero reports whether a sample starting with prefix is above zero.
func (f *fixture) nonZero(prefix string) bool {
	for _, v := range f.scrape(prefix) {
		if v > 0 {
			return true
		}
	}
	return false
}

// waitMetric polls /metrics until a sample starting with prefix is above zero.
func (f *fixture) waitMetric(prefix string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f.nonZero(prefix) {
		if time.Now().After(deadline) {
			f.t.Fatalf("no non-zero sample of %s in:\n%s", prefix, f.call("GET", "/metrics", "", http.StatusOK, nil))
		}
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
}

// TestServer_Metrics_everyFamilyHasSamples runs a few runs (one failing) and a paused queue,
// then requires a non-zero sample of each family the issue names: runs by status, step
// duration, shared queue depth, per-instance capacity, admission decisions and provider
// operations.
func TestServer_Metrics_everyFamilyHasSamples(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	f.putPipeline("key: doomed\nsteps:\n  - id: boom\n    uses: fail\n    with: {times: 9}\n")
	ok := f.waitRun(f.submit(`{"pipeline":"three","tenant_id":"m","input":{"name":"x"}}`).SharedRunID, isFinal)
	bad := f.waitRun(f.submit(`{"pipeline":"doomed","tenant_id":"m"}`).SharedRunID, isFinal)
	if ok.Status != "succeeded" || bad.Status != "failed" {
		t.Fatalf("runs = %s, %s", ok.Status, bad.Status)
	}

	// Runs wait in the shared queue while the only instance's queue is paused.
	var insts httpapi.InstanceList
	f.call("GET", "/v1/instances", "", http.StatusOK, &insts)
	if len(insts.Instances) != 1 {
		t.Fatalf("instances = %+v", insts)
	}
	inst := insts.Instances[0].RuntimeInstanceID
	f.call("POST", "/v1/instances/"+inst+"/pause", "", http.StatusOK, nil)
	var queued []string
	for i := 0; i < 3; i++ {
		queued = append(queued, f.submit(`{"pipeline":"three","tenant_id":"m","input":{"name":"q"}}`).SharedRunID)
	}
	f.waitMetric(`dair_shared_queue_depth{state="pending"}`)
	f.call("POST", "/v1/instances/"+inst+"/resume", "", http.StatusOK, nil)
	for _, id := range queued {
		if r := f.waitRun(id, isFinal); r.Status != "succeeded" {
			t.Fatalf("queued run = %+v", r)
		}
	}

	tests := []struct{ name, prefix string }{
		{"runs succeeded", `dair_runs_total{status="succeeded"}`},
		{"runs failed", `dair_runs_total{status="failed"}`},
		{"step duration succeeded", `dair_step_duration_seconds_count{outcome="succeeded"}`},
		{"step duration failed", `dair_step_duration_seconds_count{outcome="failed"}`},
		{"instance capacity", `dair_instance_capacity{field="max_concurrent_runs",runtime_instance_id="` + inst + `"}`},
		{"instance slots", `dair_instance_capacity{field="available_run_slots",runtime_instance_id="` + inst + `"}`},
		{"admission decisions", `dair_admission_decisions_total{`},
		{"provider operations", `dair_provider_operations_total{`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.waitMetric(tt.prefix)
		})
	}
}
