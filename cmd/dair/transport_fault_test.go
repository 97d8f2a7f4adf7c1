package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// faultyEndpoint is an external HTTP runtime endpoint registered as a tenant's instance: it
// hangs, refuses or fails every command, and counts them.
type faultyEndpoint struct {
	*httptest.Server
	calls atomic.Int64
}

func newFaultyEndpoint(t *testing.T, mode string) *faultyEndpoint {
	f := &faultyEndpoint{}
	stop := make(chan struct{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		switch mode {
		case "hang":
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		case "reject":
			http.Error(w, "unknown pipeline version", http.StatusUnprocessableEntity)
		default:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() { close(stop); f.Close() })
	return f
}

// heartbeat keeps a fake instance's descriptor fresh in the registry until the test ends, as a
// live host would (overwriting any mark the control plane wrote).
func heartbeat(t *testing.T, st store.Store, d *messages.CapacityDescriptor) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tk := time.NewTicker(300 * time.Millisecond)
		defer tk.Stop()
		for {
			d.LastHeartbeatAt = time.Now().UnixNano()
			if err := st.PutInstance(ctx, d, 3*time.Second); err != nil && ctx.Err() == nil {
				t.Logf("heartbeat %s: %v", d.RuntimeInstanceId, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
}

// fakeInstance is the descriptor of a tenant's dedicated instance served at endpoint.
func fakeInstance(tenant, endpoint string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: tenant + "-runtime-1", HostId: "external", ProviderName: "http",
		TransportName: "http", Endpoint: endpoint, Status: messages.InstanceReady, WorkerCount: 10, AvailableWorkerCount: 10,
		MaxLocalWorkersPerExecution: 3, QueueCapacity: 100, MaxConcurrentRuns: 10, AvailableRunSlots: 10, CanAcceptRun: true,
		TenantId: tenant, IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: tenant + "-runtime", MaxRuntimeInstances: 2,
		Roles: []string{"runtime"}, Metadata: map[string]string{"provider.name": "http"}}
}

// faultRig is a control plane whose scale-out spawns HTTP process hosts, with external faulty
// endpoints registered as its tenants' instances.
type faultRig struct {
	ctx   context.Context
	redis *testkit.Redis
	cp    *serveProc
	c     *client.Client
	st    store.Store
}

// setup registers an endpoint answering in mode as tenant's first instance (heartbeating like a
// live host) in a dedicated scope of maxInstances.
func (f *faultRig) setup(t *testing.T, tenant, mode string, maxInstances int32) *faultyEndpoint {
	e := newFaultyEndpoint(t, mode)
	ten := dedicatedTenant(tenant)
	ten.MaxRuntimeInstances = maxInstances
	_, err := f.c.PutTenant(f.ctx, ten)
	require.NoError(t, err)
	d := fakeInstance(tenant, e.URL)
	d.MaxRuntimeInstances = maxInstances
	heartbeat(t, f.st, d)
	return e
}

func (f *faultRig) submit(t *testing.T, tenant string, n int) []string {
	var ids []string
	for range n {
		s, err := f.c.Submit(f.ctx, httpapi.SubmitRequest{Pipeline: "burst", TenantID: tenant})
		require.NoError(t, err)
		ids = append(ids, s.SharedRunID)
	}
	return ids
}

// failures returns the reasons of a run's dispatch_failed ledger entries.
func (f *faultRig) failures(t *testing.T, id string) []string {
	entries, err := f.st.ReadLedger(f.ctx, id, 0, 0)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.Kind == messages.KindDispatchFailed {
			out = append(out, e.Reason)
		}
	}
	return out
}

// TestTransport_dispatchFaults: a control plane whose scale-out spawns HTTP process hosts
// dispatches to external HTTP endpoints registered as tenants' instances (heartbeating like
// live hosts):
//   - reject: a 422 is not retried: one call, and the run fails with http-command-non-retryable;
//   - hang: every attempt times out, is retried, and the retries are exhausted; the ledger
//     records http-retry-exhausted with the timeout; the circuit opens, the instance is marked
//     unhealthy, a replacement host is spawned and the run finishes there;
//   - fail: 503s open the circuit, the instance is marked unhealthy in the registry, a
//     replacement is requested and every run finishes on it.
func TestTransport_dispatchFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := startProcessControlPlane(t, r.URL(), t.TempDir(), "--host-transport", "http", "--runtime-call-timeout", "300ms",
		"--runtime-call-attempts", "3", "--log-level", "warn")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s", cp.logs.String())
		}
	})
	f := &faultRig{ctx: ctx, redis: r, cp: cp, c: client.New(cp.url, ""), st: openRedisStore(t, r.URL())}
	_, err := f.c.PutPipeline(ctx, "burst", []byte(burstPipeline))
	require.NoError(t, err)
	t.Run("reject", f.reject)
	t.Run("hang", f.hang)
	t.Run("fail", f.fail)
	cp.kill(t)
	waitNoHosts(t, r.URL(), cp.data)
}

func (f *faultRig) reject(t *testing.T) {
	e := f.setup(t, "reject", "reject", 1)
	ids := f.submit(t, "reject", 1)
	done := waitAll(t, f.ctx, f.c, ids, time.Minute)
	run := done[ids[0]]
	require.Equal(t, messages.RunFailed, run.Status)
	require.Equal(t, "dispatch-non-retryable: http-command-non-retryable", run.FailureReason)
	require.Equal(t, []string{"http-command-non-retryable"}, f.failures(t, ids[0]))
	require.EqualValues(t, 1, e.calls.Load(), "a non-retryable failure was retried")
}

func (f *faultRig) hang(t *testing.T) {
	e := f.setup(t, "hang", "hang", 2)
	ids := f.submit(t, "hang", 2)
	done := waitAll(t, f.ctx, f.c, ids, 60*time.Second)
	for _, id := range ids {
		require.Equal(t, messages.RunSucceeded, done[id].Status, done[id].FailureReason)
		require.Equal(t, "hang-runtime-2", done[id].AssignedRuntimeInstanceID, "finished on the replacement")
	}
	var exhausted int
	for _, id := range ids {
		for _, reason := range f.failures(t, id) {
			if reason == "http-retry-exhausted: 3 attempts, last http-dispatch-timeout" {
				exhausted++
			}
		}
	}
	require.Positive(t, exhausted, "no timeout exhaustion recorded")
	require.GreaterOrEqual(t, e.calls.Load(), int64(3*exhausted), "each exhausted dispatch made 3 attempts")
}

func (f *faultRig) fail(t *testing.T) {
	e := f.setup(t, "fail", "fail", 2)
	ids := f.submit(t, "fail", 4)
	marked := make(chan struct{})
	go func() {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			if d, err := f.st.GetInstance(f.ctx, "fail-runtime-1"); err == nil && d.Status == messages.InstanceUnhealthy &&
				d.Metadata["health.reason"] == "circuit-open" {
				close(marked)
				return
			}
			select {
			case <-f.ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	done := waitAll(t, f.ctx, f.c, ids, 60*time.Second)
	for _, id := range ids {
		require.Equal(t, messages.RunSucceeded, done[id].Status, done[id].FailureReason)
		require.Equal(t, "fail-runtime-2", done[id].AssignedRuntimeInstanceID, "finished on the replacement")
	}
	select {
	case <-marked:
	case <-time.After(5 * time.Second):
		t.Fatal("the instance was never marked unhealthy in the registry")
	}
	require.Contains(t, f.cp.logs.String(), "dispatch circuit opened")
	failed := 0
	for _, id := range ids {
		for _, reason := range f.failures(t, id) {
			require.True(t, strings.HasPrefix(reason, "http-"), "reason %q", reason)
			failed++
		}
	}
	require.Positive(t, failed)
	require.Positive(t, e.calls.Load())
	procs := map[string]bool{}
	for _, p := range hostProcs(t, f.redis.URL()) {
		procs[p.instance] = true
	}
	require.True(t, procs["fail-runtime-2"], "the replacement is a process host")
}
