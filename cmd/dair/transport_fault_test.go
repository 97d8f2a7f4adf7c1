package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// heartbeat keeps a fake instance's descriptor fresh in the registry until the test ends, as a
// live host would (overwriting any mark the control plane wrote). The first heartbeat is stored
// before it returns, so runs submitted next see the instance.
func heartbeat(t *testing.T, st store.Store, d *messages.CapacityDescriptor) {
	ctx, cancel := context.WithCancel(context.Background())
	d.LastHeartbeatAt = time.Now().UnixNano()
	require.NoError(t, st.PutInstance(ctx, d, 3*time.Second))
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tk := time.NewTicker(300 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			d.LastHeartbeatAt = time.Now().UnixNano()
			if err := st.PutInstance(ctx, d, 3*time.Second); err != nil && ctx.Err() == nil {
				t.Logf("heartbeat %s: %v", d.RuntimeInstanceId, err)
			}
		}
	}()
}

// fakeInstance is the descriptor of a tenant's dedicated instance served at e over transport.
func fakeInstance(tenant, transport string, e *faultyEndpoint) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: tenant + "-runtime-1", HostId: "external", ProviderName: transport,
		TransportName: transport, Endpoint: e.endpoint, Status: messages.InstanceReady, WorkerCount: 10, AvailableWorkerCount: 10,
		MaxLocalWorkersPerExecution: 3, QueueCapacity: 100, MaxConcurrentRuns: 10, AvailableRunSlots: 10, CanAcceptRun: true,
		TenantId: tenant, IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: tenant + "-runtime", MaxRuntimeInstances: 2,
		Roles: []string{"runtime"}, Metadata: mergeMeta(map[string]string{"provider.name": transport}, e.metadata)}
}

func mergeMeta(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// faultRig is a control plane whose scale-out spawns process hosts of one transport, with
// external faulty endpoints of that transport registered as its tenants' instances.
type faultRig struct {
	transport string
	url       string // the store
	ctx       context.Context
	redis     *testkit.Redis
	cp        *serveProc
	c         *client.Client
	st        store.Store
}

// setup registers an endpoint answering in mode as tenant's first instance (heartbeating like a
// live host) in a dedicated scope of maxInstances.
func (f *faultRig) setup(t *testing.T, tenant, mode string, maxInstances int32) *faultyEndpoint {
	e := newFaultyEndpoint(t, f.transport, tenant+"-runtime-1", mode, f.url)
	ten := dedicatedTenant(tenant)
	ten.MaxRuntimeInstances = maxInstances
	_, err := f.c.PutTenant(f.ctx, ten)
	require.NoError(t, err)
	d := fakeInstance(tenant, f.transport, e)
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

// TestTransport_dispatchFaults: for each remote transport, a control plane whose scale-out
// spawns process hosts of that transport dispatches to external endpoints of the transport
// registered as tenants' instances (heartbeating like live hosts):
//   - reject: a refusal is not retried: one call, and the run fails with the transport's
//     non-retryable reason (http/grpc-command-non-retryable; a Redis reply that is no result:
//     redis-command-queue-command-invalid-response);
//   - hang: every attempt times out, is retried, and the retries are exhausted; the ledger
//     records <transport>-retry-exhausted with <transport>-dispatch-timeout; the circuit opens,
//     the instance is marked unhealthy, a replacement host is spawned and the run finishes there;
//   - fail (http, grpc): retryable failures open the circuit, the instance is marked unhealthy
//     in the registry, a replacement is requested and every run finishes on it.
func TestTransport_dispatchFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	for i, transport := range []string{"http", "grpc", "redis-command-queue"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			url := fmt.Sprintf("redis://%s/%d", r.Addr(), 10+i)
			cp := startProcessControlPlane(t, url, t.TempDir(), "--host-transport", transport, "--runtime-call-timeout", "300ms",
				"--runtime-call-attempts", "3", "--log-level", "warn")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("control plane log:\n%s", cp.logs.String())
				}
			})
			f := &faultRig{transport: transport, url: url, ctx: ctx, redis: r, cp: cp, c: client.New(cp.url, ""), st: openRedisStore(t, url)}
			_, err := f.c.PutPipeline(ctx, "burst", []byte(burstPipeline))
			require.NoError(t, err)
			t.Run("reject", f.reject)
			t.Run("hang", f.hang)
			if transport != "redis-command-queue" {
				t.Run("fail", f.fail)
			}
			cp.kill(t)
			waitNoHosts(t, url, cp.data)
		})
	}
}

// requireReplacement checks that a run of tenant finished on replacement capacity: one of the
// tenant's instances other than the faulty first one (the faulty instance is unhealthy and does
// not count in the scope, so the replacement may be -2 or, when two requests raced, -3).
func requireReplacement(t *testing.T, tenant, got string) {
	t.Helper()
	require.True(t, strings.HasPrefix(got, tenant+"-runtime-") && got != tenant+"-runtime-1", "finished on %q, not on a replacement", got)
}

func (f *faultRig) reject(t *testing.T) {
	e := f.setup(t, "reject", modeReject, 1)
	ids := f.submit(t, "reject", 1)
	done := waitAll(t, f.ctx, f.c, ids, time.Minute)
	run := done[ids[0]]
	want := f.transport + "-command-non-retryable"
	if f.transport == "redis-command-queue" {
		want = f.transport + "-command-invalid-response"
	}
	require.Equal(t, messages.RunFailed, run.Status)
	require.Equal(t, "dispatch-non-retryable: "+want, run.FailureReason)
	require.Equal(t, []string{want}, f.failures(t, ids[0]))
	require.EqualValues(t, 1, e.calls.Load(), "a non-retryable failure was retried")
}

func (f *faultRig) hang(t *testing.T) {
	e := f.setup(t, "hang", modeHang, 2)
	ids := f.submit(t, "hang", 2)
	done := waitAll(t, f.ctx, f.c, ids, 60*time.Second)
	for _, id := range ids {
		require.Equal(t, messages.RunSucceeded, done[id].Status, done[id].FailureReason)
		requireReplacement(t, "hang", done[id].AssignedRuntimeInstanceID)
	}
	var exhausted int
	for _, id := range ids {
		for _, reason := range f.failures(t, id) {
			if reason == f.transport+"-retry-exhausted: 3 attempts, last "+f.transport+"-dispatch-timeout" {
				exhausted++
			}
		}
	}
	require.Positive(t, exhausted, "no timeout exhaustion recorded")
	require.GreaterOrEqual(t, e.calls.Load(), int64(3*exhausted), "each exhausted dispatch made 3 attempts")
}

func (f *faultRig) fail(t *testing.T) {
	e := f.setup(t, "fail", modeFail, 2)
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
		requireReplacement(t, "fail", done[id].AssignedRuntimeInstanceID)
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
			require.True(t, strings.HasPrefix(reason, f.transport+"-"), "reason %q", reason)
			failed++
		}
	}
	require.Positive(t, failed)
	require.Positive(t, e.calls.Load())
	procs := map[string]bool{}
	for _, p := range hostProcs(t, f.url) {
		procs[p.instance] = true
	}
	for _, id := range ids {
		require.True(t, procs[done[id].AssignedRuntimeInstanceID], "run %s finished on %s, not a process host", id, done[id].AssignedRuntimeInstanceID)
	}
}
