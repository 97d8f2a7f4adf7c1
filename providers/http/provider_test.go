package http_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	httpprov "github.com/dairuntime/dair/providers/http"
	"github.com/dairuntime/dair/providers/remote"
	"github.com/dairuntime/dair/testkit"
)

// host serves a runtime host's HTTP command endpoints for b on a loopback port and records the
// headers of every request.
type host struct {
	*httptest.Server
	mu      sync.Mutex // guards headers
	headers []http.Header
}

func serve(t *testing.T, b *testkit.RuntimeBackend) *host {
	h := &host{}
	inner := httpprov.NewHandler(b, b.Instances)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		b.SetHang(false)
		h.Close()
	})
	return h
}

func newProvider(t *testing.T, cfg httpprov.Config) *httpprov.Provider {
	p := httpprov.New(cfg)
	t.Cleanup(p.Close)
	return p
}

func descriptor(id, endpoint string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, ProviderName: httpprov.Name, TransportName: httpprov.Name, Endpoint: endpoint}
}

func dispatchReq(id string) *messages.DispatchRequest {
	return &messages.DispatchRequest{SharedRunId: "run-1", RuntimeInstanceId: id, Snapshot: &messages.ExecutionContextSnapshot{
		TenantId: "acme", TenantGroupId: "g", OrgId: "org-7", UserId: "u-42", CorrelationId: "c-1", Roles: []string{"tenant"}}}
}

// TestProvider_Dispatch_roundTrip: a dispatch in protobuf and in JSON arrives with its snapshot
// byte-equal and the tenant headers x-tenant-id, x-org-id, x-user-id; status reads work.
func TestProvider_Dispatch_roundTrip(t *testing.T) {
	for _, json := range []bool{false, true} {
		b := testkit.NewRuntimeBackend("i-1")
		h := serve(t, b)
		p := newProvider(t, httpprov.Config{JSON: json})
		req := dispatchReq("i-1")
		res := p.Dispatch(context.Background(), descriptor("i-1", h.URL), req)
		require.True(t, res.GetOk(), res.GetReason())
		got, _ := b.Dispatches()
		require.Len(t, got, 1)
		require.True(t, proto.Equal(req.Snapshot, got[0].Snapshot), "json=%v: snapshot at the host %v, sent %v", json, got[0].Snapshot, req.Snapshot)
		h.mu.Lock()
		hd := h.headers[0]
		h.mu.Unlock()
		require.Equal(t, "acme", hd.Get(messages.MetadataTenantID))
		require.Equal(t, "org-7", hd.Get(messages.MetadataOrgID))
		require.Equal(t, "u-42", hd.Get(messages.MetadataUserID))
		qs := p.QueueStatus(context.Background(), descriptor("i-1", h.URL))
		require.True(t, qs.GetResult().GetOk(), qs.GetResult().GetReason())
	}
}

// TestProvider_Dispatch_faults: a host that hangs is timed out, retried and exhausted with
// http-dispatch-timeout; a refusal (404: instance not served here) is not retried; 503s open
// the endpoint's circuit.
func TestProvider_Dispatch_faults(t *testing.T) {
	b := testkit.NewRuntimeBackend("i-1")
	h := serve(t, b)
	p := newProvider(t, httpprov.Config{Remote: remote.Config{Timeout: 100 * time.Millisecond, Attempts: 3, Backoff: time.Millisecond,
		CircuitFailures: 100}})
	ctx := context.Background()

	b.SetHang(true)
	res := p.Dispatch(ctx, descriptor("i-1", h.URL), dispatchReq("i-1"))
	require.True(t, res.GetRetryable())
	require.Equal(t, "http-retry-exhausted: 3 attempts, last http-dispatch-timeout", res.GetReason())
	testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return b.Calls() == 3 }, "three attempts reached the host")
	b.SetHang(false)

	h.mu.Lock()
	before := len(h.headers)
	h.mu.Unlock()
	res = p.Dispatch(ctx, descriptor("other", h.URL), dispatchReq("other"))
	require.False(t, res.GetRetryable())
	require.Equal(t, "http-command-non-retryable", res.GetReason())
	h.mu.Lock()
	require.Equal(t, before+1, len(h.headers), "the refusal was retried")
	h.mu.Unlock()

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	q := newProvider(t, httpprov.Config{Remote: remote.Config{Attempts: 1, CircuitFailures: 2, CircuitOpenFor: time.Minute}})
	for range 2 {
		res = q.Dispatch(ctx, descriptor("i-1", failing.URL), dispatchReq("i-1"))
		require.Equal(t, "http-command-failed", res.GetReason())
	}
	res = q.Dispatch(ctx, descriptor("i-1", failing.URL), dispatchReq("i-1"))
	require.Equal(t, "http-circuit-open", res.GetReason())
}
