package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/local"
	"github.com/dairuntime/dair/testkit"
)

// scaleOutTrials is the minimum number of scale-outs measured per sub-benchmark run.
const scaleOutTrials = 20

// BenchmarkScaleOut measures a scale-out request until its capacity is ready in the registry,
// over at least scaleOutTrials fresh dedicated tenant scopes, and reports p50-ns, p99-ns and
// max-ns. /local: an in-process node on the embedded store (NoSync), through the local
// provider (create the instance actor, wait until it is ready in the registry). /process: a
// control-plane node with --host-mode process on Redis; each trial submits a run of a new tenant
// and reads the request's created → fulfilled time from the store (child process start, cluster
// join, self-registration).
func BenchmarkScaleOut(b *testing.B) {
	b.Run("local", benchScaleOutLocal)
	b.Run("process", benchScaleOutProcess)
}

func benchTenant(i int) *messages.TenantSettings {
	return tenancy.Normalize(&messages.TenantSettings{TenantId: fmt.Sprintf("bench-%d", i), IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIdPrefix: fmt.Sprintf("bench-%d-runtime", i), MaxRuntimeInstances: 1, WorkerCountPerInstance: 2,
		MaxConcurrentRunsPerInstance: 2, LocalQueueCapacity: 10})
}

func benchScaleOutLocal(b *testing.B) {
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(b.TempDir(), "dair.db"), NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, st.Close()) })
	ctx := context.Background()
	n, err := actors.Start(ctx, actors.Config{NodeID: "bench", Store: st})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, n.Stop(context.Background())) })
	trials := max(b.N, scaleOutTrials)
	lat := make([]time.Duration, 0, trials)
	b.ResetTimer()
	for i := 0; i < trials; i++ {
		req := &messages.ScaleOutRequest{RequestId: fmt.Sprintf("bench-local-%d-%d", b.N, i), Settings: benchTenant(i)}
		t0 := time.Now()
		res := n.Providers().ScaleOut(ctx, req, local.Name)
		lat = append(lat, time.Since(t0))
		require.True(b, res.Result.GetOk(), "scale-out %d: %v", i, res.Result)
	}
	b.StopTimer()
	reportScaleOut(b, lat)
}

func benchScaleOutProcess(b *testing.B) {
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{})
	cp := startProcessControlPlane(b, r.URL(), b.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(cp.url, "")
	_, err := c.PutPipeline(ctx, "hello", []byte(helloPipeline))
	require.NoError(b, err)
	st := openRedisStore(b, r.URL())
	trials := max(b.N, scaleOutTrials)
	lat := make([]time.Duration, 0, trials)
	b.ResetTimer()
	for i := 0; i < trials; i++ {
		ts := benchTenant(i)
		_, err := c.PutTenant(ctx, tenantOf(ts))
		require.NoError(b, err)
		sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "hello", TenantID: ts.TenantId, Input: []byte(`{"name":"b"}`)})
		require.NoError(b, err)
		var got *messages.ScaleOutRequest
		err = testkit.WaitFor(ctx, 5*time.Millisecond, func() (bool, error) {
			reqs, err := st.ListScaleOuts(ctx, messages.ScaleOutFulfilled, messages.ScaleOutFailed)
			if err != nil {
				return false, err
			}
			for _, q := range reqs {
				if q.GetSettings().GetTenantId() == ts.TenantId {
					got = q
					return true, nil
				}
			}
			return false, nil
		})
		require.NoError(b, err, "trial %d; log:\n%s", i, cp.logs.String())
		require.Equal(b, messages.ScaleOutFulfilled, got.Status, "trial %d: %s", i, got.FailureReason)
		lat = append(lat, time.Duration(got.UpdatedAt-got.CreatedAt))
		run, err := c.GetRun(ctx, sub.SharedRunID)
		require.NoError(b, err)
		if !messages.IsTerminalRun(run.Status) {
			// The run completes on the new host; the next trial does not wait for it.
			continue
		}
		require.Equal(b, messages.RunSucceeded, run.Status)
	}
	b.StopTimer()
	reportScaleOut(b, lat)
	cp.kill(b)
}

// reportScaleOut reports the latency quantiles of lat.
func reportScaleOut(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) }
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
}
