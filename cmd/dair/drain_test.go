package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

const quickPipeline = `key: quick
steps:
  - id: hello
    uses: echo
    with: {value: "hi"}
  - id: nap
    uses: sleep
    needs: [hello]
    with: {duration: 20ms}
`

// capacitySample is what the sampler saw over the drain.
type capacitySample struct {
	mu         sync.Mutex // guards every field
	samples    int
	violations []string
	maxRunning map[string]int32
	maxHeld    map[string]int
	done       chan struct{} // closed when the sampler has returned
}

// sampleCapacity reads the registry and every instance's reservation count of tenant every
// 5 ms until stop closes, recording any instance above its max_concurrent_runs.
func sampleCapacity(st *redisstore.Store, tenant string, stop <-chan struct{}) *capacitySample {
	s := &capacitySample{maxRunning: map[string]int32{}, maxHeld: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			insts, err := st.ListInstances(ctx)
			if err != nil {
				cancel()
				continue
			}
			for _, d := range insts {
				if d.TenantId != tenant {
					continue
				}
				held, err := st.ReservationCount(ctx, d.RuntimeInstanceId)
				s.mu.Lock()
				s.samples++
				s.maxRunning[d.RuntimeInstanceId] = max(s.maxRunning[d.RuntimeInstanceId], d.RunningRunCount)
				if d.RunningRunCount > d.MaxConcurrentRuns {
					s.violations = append(s.violations, fmt.Sprintf("%s running %d > %d", d.RuntimeInstanceId, d.RunningRunCount, d.MaxConcurrentRuns))
				}
				if err == nil {
					s.maxHeld[d.RuntimeInstanceId] = max(s.maxHeld[d.RuntimeInstanceId], held)
					if held > int(d.MaxConcurrentRuns) {
						s.violations = append(s.violations, fmt.Sprintf("%s holds %d reservations > %d", d.RuntimeInstanceId, held, d.MaxConcurrentRuns))
					}
				}
				s.mu.Unlock()
			}
			cancel()
		}
	}()
	return s
}

// TestCluster_twoControlPlanesDrainSharedQueue: two control-plane nodes and two runtime nodes;
// 1,000 runs queued while the tenant's instances are paused, then both pumps drain the shared
// queue. Sampled every 5 ms, no instance is ever above its max_concurrent_runs (registry and
// reservations); every run succeeds with exactly one dispatch and one execution start; both
// pumps dispatched, and no run's pump id equals its assigned instance id.
func TestCluster_twoControlPlanesDrainSharedQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp, rt := []string{actors.RoleControlPlane}, []string{actors.RoleRuntime}
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: 4, RedisURL: r.URL(),
		NodeIDs: []string{"cp1", "cp2", "rt1", "rt2"}, Roles: [][]string{cp, cp, rt, rt}})
	pc.WaitTopology(4)
	st, err := redisstore.Open(ctx, redisstore.Options{URL: r.URL()})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()

	const tenant, runs = "drain", 1000
	cps := []*client.Client{pc.Node(0).Client(), pc.Node(1).Client()}
	_, err = cps[0].PutTenant(ctx, httpapi.Tenant{TenantID: tenant, IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIDPrefix: "drain-runtime", MaxRuntimeInstances: 2, WorkerCountPerInstance: 20,
		MaxConcurrentRunsPerInstance: 10, LocalQueueCapacity: 100})
	require.NoError(t, err)
	_, err = cps[0].PutPipeline(ctx, "quick", []byte(quickPipeline))
	require.NoError(t, err)

	// Warm up, deterministically: one run makes the tenant scale out to its first instance;
	// with that instance paused, a second run makes it scale out to the second (admission sees
	// the paused instance as busy and the tenant below MaxRuntimeInstances).
	var list *httpapi.InstanceList
	for want := 1; want <= 2; want++ {
		s, err := cps[want%2].Submit(ctx, httpapi.SubmitRequest{Pipeline: "quick", TenantID: tenant})
		require.NoError(t, err)
		for id, run := range waitAll(t, ctx, cps[0], []string{s.SharedRunID}, time.Minute) {
			require.Equal(t, messages.RunSucceeded, run.Status, "warm-up run %s: %s", id, run.FailureReason)
		}
		testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
			l, err := cps[0].ListInstances(ctx, tenant)
			if err != nil {
				return false
			}
			list = l
			return len(l.Instances) == want
		}, fmt.Sprintf("the warm-up did not scale the tenant to %d instances", want))
		for _, in := range list.Instances {
			if !in.IsQueuePaused {
				_, err := cps[0].ControlInstance(ctx, in.RuntimeInstanceID, client.OpPause)
				require.NoError(t, err)
			}
		}
	}

	// Queue the runs with every instance paused, then resume and let both pumps drain.
	ids := make([]string, runs)
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < runs; i += 16 {
				s, err := cps[i%2].Submit(ctx, httpapi.SubmitRequest{Pipeline: "quick", TenantID: tenant})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = s.SharedRunID
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	queued, err := st.ListRuns(ctx, store.RunFilter{TenantID: tenant, Status: messages.RunQueued, Limit: 2 * runs})
	require.NoError(t, err)
	require.Len(t, queued, runs, "runs were dispatched while every instance was paused")

	stop := make(chan struct{})
	samples := sampleCapacity(st, tenant, stop)
	start := time.Now()
	for _, in := range list.Instances {
		_, err := cps[1].ControlInstance(ctx, in.RuntimeInstanceID, client.OpResume)
		require.NoError(t, err)
	}
	final := map[string]*messages.SharedRun{}
	testkit.Eventually(t, 3*time.Minute, 50*time.Millisecond, func() bool {
		for _, id := range ids {
			if _, ok := final[id]; ok {
				continue
			}
			run, err := st.GetRun(ctx, id)
			if err != nil || !messages.IsTerminalRun(run.Status) {
				return false
			}
			final[id] = run
		}
		return true
	}, "every queued run finished")
	drained := time.Since(start)
	close(stop)
	<-samples.done

	samples.mu.Lock()
	require.Empty(t, samples.violations, "an instance went over its slots")
	require.Greater(t, samples.samples, 100, "too few capacity samples")
	t.Logf("drained %d runs in %s (%.0f runs/s); %d samples; max running %v; max reservations %v",
		runs, drained.Round(time.Millisecond), float64(runs)/drained.Seconds(), samples.samples, samples.maxRunning, samples.maxHeld)
	samples.mu.Unlock()

	pumps := map[string]int{}
	for _, id := range ids {
		run := final[id]
		require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", id, run.FailureReason)
		require.NotEqual(t, run.PumpRuntimeInstanceId, run.AssignedRuntimeInstanceId, "run %s", id)
		// The dispatch entry records the provider's answer: on a pump of another node it can
		// land just after the run ended. Wait for it, then count.
		var entries []*messages.LedgerEntry
		require.NoError(t, testkit.WaitFor(ctx, 5*time.Millisecond, func() (bool, error) {
			var err error
			entries, err = st.ReadLedger(ctx, id, 0, 0)
			for _, e := range entries {
				if e.Kind == messages.KindDispatch {
					return true, err
				}
			}
			return false, err
		}), "run %s has no dispatch entry", id)
		dispatches, starts := 0, 0
		for _, e := range entries {
			switch e.Kind {
			case messages.KindDispatch:
				dispatches++
				var data struct {
					Pump string `json:"pump_runtime_instance_id"`
				}
				require.NoError(t, json.Unmarshal(e.Data, &data))
				require.Equal(t, run.AssignedRuntimeInstanceId, e.RuntimeInstanceId, "run %s dispatched to another instance than it ran on", id)
				require.Equal(t, run.PumpRuntimeInstanceId, data.Pump, "run %s", id)
				require.NotEqual(t, data.Pump, e.RuntimeInstanceId, "run %s", id)
				pumps[data.Pump]++
			case messages.KindExecutionStarted:
				starts++
			}
		}
		require.Equal(t, 1, dispatches, "run %s dispatched %d times", id, dispatches)
		require.Equal(t, 1, starts, "run %s started %d executions", id, starts)
	}
	require.Contains(t, pumps, "pump-cp1", "pumps: %v", pumps)
	require.Contains(t, pumps, "pump-cp2", "pumps: %v", pumps)
	t.Logf("dispatches per pump: %v", pumps)
}
