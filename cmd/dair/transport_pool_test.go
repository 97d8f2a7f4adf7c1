package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// TestTransport_pooledHTTPHost: one runtime process started with --host-transport http
// --runtime-pool 3 serves runtime-http-1..3 behind one endpoint, each registered as its own
// dispatch target (provider http) with its own queue and slots; a control plane spreads a
// burst over them through the http provider and every run succeeds.
func TestTransport_pooledHTTPHost(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bind := testkit.FreeAddr(t)
	cp := startServeTB(t, "node", "--store", r.URL(), "--node-id", "cp", "--bind", bind, "--cluster-profile", "local",
		"--roles", "control-plane")
	pool := startServeTB(t, "node", "--store", r.URL(), "--node-id", "pool-1", "--bind", testkit.FreeAddr(t), "--join", bind,
		"--cluster-profile", "local", "--roles", "runtime", "--host-transport", "http", "--runtime-pool", "3")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s\npool log:\n%s", cp.logs.String(), pool.logs.String())
		}
	})
	c := client.New(cp.url, "")
	var endpoint string
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		list, err := c.ListInstances(ctx, "")
		if err != nil || len(list.Instances) != 3 {
			return false
		}
		for _, in := range list.Instances {
			if in.ProviderName != "http" || in.HostID != "pool-1" || (endpoint != "" && in.Endpoint != endpoint) {
				return false
			}
			endpoint = in.Endpoint
		}
		return true
	}, "runtime-http-1..3 registered behind one http endpoint")
	_, err := c.PutPipeline(ctx, "burst", []byte(burstPipeline))
	require.NoError(t, err)
	var ids []string
	for range 30 {
		s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "burst", TenantID: "acme"})
		require.NoError(t, err)
		ids = append(ids, s.SharedRunID)
	}
	done := waitAll(t, ctx, c, ids, time.Minute)
	used := map[string]int{}
	for _, id := range ids {
		run := done[id]
		require.Equal(t, messages.RunSucceeded, run.Status, run.FailureReason)
		used[run.AssignedRuntimeInstanceID]++
		led, err := c.Ledger(ctx, run.ExecutionID)
		require.NoError(t, err)
		for _, e := range led.Entries {
			if e.Kind == messages.KindDispatch {
				require.Contains(t, string(e.Data), `"provider":"http"`)
			}
		}
	}
	for id := range used {
		require.Contains(t, []string{"runtime-http-1", "runtime-http-2", "runtime-http-3"}, id)
	}
	require.GreaterOrEqual(t, len(used), 2, "the burst spread over the pooled instances: %v", used)
	t.Logf("runs per pooled instance: %v (endpoint %s)", used, endpoint)
}
