package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/testkit"
)

// invokeSession posts POST /v1/sessions/{session}/invoke and reads its SSE stream to the end;
// it returns the route header and the event kinds in order.
func invokeSession(t *testing.T, ctx context.Context, base, session, body string) (string, []string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/sessions/"+session+"/invoke", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { require.NoError(t, res.Body.Close()) }()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var kinds []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			kinds = append(kinds, k)
		}
	}
	require.NoError(t, sc.Err())
	return res.Header.Get(api.InvokeRouteHeader), kinds
}

// TestInvoke_routedThroughRuntimeHost is seed 001's router path: a control plane whose
// scale-out spawns gRPC process hosts. A dedicated tenant's first invocation finds no capacity:
// the control plane submits it itself (route "local"), which scales out the tenant's gRPC host.
// The next invocation goes through that host's runtime.v1.RuntimeService.Invoke (route
// "grpc/<instance>", the tenant metadata checked by the host against the snapshot), and its
// SSE stream carries the run's events to run_succeeded.
func TestInvoke_routedThroughRuntimeHost(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp := startProcessControlPlane(t, r.URL(), t.TempDir(), "--host-transport", "grpc")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s", cp.logs.String())
		}
	})
	c := client.New(cp.url, "")
	_, err := c.PutTenant(ctx, dedicatedTenant("acme"))
	require.NoError(t, err)
	_, err = c.PutPipeline(ctx, "burst", []byte(burstPipeline))
	require.NoError(t, err)
	body := `{"pipeline":"burst","tenant_id":"acme","input":{"n":1}}`

	route, kinds := invokeSession(t, ctx, cp.url, "s1", body)
	require.Equal(t, api.InvokeRouteLocal, route, "no capacity yet: the control plane submits")
	require.NotEmpty(t, kinds)
	require.Equal(t, "run_succeeded", kinds[len(kinds)-1])

	route, kinds = invokeSession(t, ctx, cp.url, "s2", body)
	require.Equal(t, "grpc/acme-runtime-1", route, "routed through the tenant's gRPC runtime host")
	require.Contains(t, kinds, "dispatch")
	require.Equal(t, "run_succeeded", kinds[len(kinds)-1])
	cp.stop(t)
	waitNoHosts(t, r.URL(), cp.data)
}
