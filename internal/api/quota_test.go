package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// TestServer_SubmitRun_tenantQueueFull: a tenant whose rate allows one run per 1,000 s keeps
// its next runs queued (waiting_reason tenant-rate-limit); beyond max_queued_runs a submit is
// 429 tenant_queue_full with Retry-After. The quota settings round-trip through PUT and GET.
func TestServer_SubmitRun_tenantQueueFull(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	var got httpapi.Tenant
	f.call("PUT", "/v1/tenants/q", `{"isolation_mode":"shared","weight":2,"max_queued_runs":2,"runs_per_second":0.001,"runs_burst":1,"max_concurrent_runs":5}`,
		http.StatusOK, &got)
	if got.Weight != 2 || got.MaxQueuedRuns != 2 || got.RunsPerSecond != 0.001 || got.RunsBurst != 1 || got.MaxConcurrentRuns != 5 {
		t.Fatalf("PUT answered %+v", got)
	}
	first := f.submit(`{"pipeline":"three","tenant_id":"q","input":{"name":"a"}}`)
	queues, ok := f.node.Store().(store.TenantQueues)
	if !ok {
		t.Fatal("the test store keeps no tenant queues")
	}
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		var r httpapi.Run
		f.call("GET", "/v1/runs/"+first.SharedRunID, "", http.StatusOK, &r)
		// A claimed run counts as queued until its claim is acknowledged, just after the
		// dispatch: wait for both.
		n, err := queues.QueuedCount(context.Background(), "q")
		return r.Status != messages.RunQueued && r.Status != messages.RunScaleOutRequested && err == nil && n == 0
	}, "the first run took the bucket's token, was dispatched and left the tenant's queue")
	keyed := f.submit(`{"pipeline":"three","tenant_id":"q","input":{"name":"a"},"idempotency_key":"q-1"}`)
	second := f.submit(`{"pipeline":"three","tenant_id":"q","input":{"name":"a"}}`)

	req, err := http.NewRequest("POST", f.srv.URL+"/v1/runs", strings.NewReader(`{"pipeline":"three","tenant_id":"q","input":{"name":"a"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("third queued submit = %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	eb := f.callErr("POST", "/v1/runs", `{"pipeline":"three","tenant_id":"q","input":{"name":"a"}}`, http.StatusTooManyRequests, httpapi.CodeTenantQueueFull)
	if !strings.Contains(eb.Error.Message, "max_queued_runs 2") || strings.Contains(eb.Error.Message, "controlplane") {
		t.Fatalf("message = %q", eb.Error.Message)
	}
	// The queue is full, but a retry of an accepted submission finds its run: 202, the same id.
	var again httpapi.SubmitResponse
	f.call("POST", "/v1/runs", `{"pipeline":"three","tenant_id":"q","input":{"name":"a"},"idempotency_key":"q-1"}`,
		http.StatusAccepted, &again)
	if again.SharedRunID != keyed.SharedRunID {
		t.Fatalf("retry with the key answered run %s, want %s", again.SharedRunID, keyed.SharedRunID)
	}
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		var r httpapi.Run
		f.call("GET", "/v1/runs/"+second.SharedRunID, "", http.StatusOK, &r)
		return r.Status == messages.RunQueued && r.WaitingReason == "tenant-rate-limit" && r.FailureReason == ""
	}, "the queued run shows why it waits")
}
