package actors_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

func putSeedTenants(t *testing.T, n *actors.Node) {
	t.Helper()
	for _, ts := range tenancy.SeedTenants() {
		_, err := n.PutTenant(context.Background(), ts)
		require.NoError(t, err)
	}
}

// instanceCounter samples the registry and records the most instances seen per prefix.
func instanceCounter(t *testing.T, st store.Store) (maxSeen func() map[string]int, stop func()) {
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			list, err := st.ListInstances(context.Background())
			if err != nil {
				continue
			}
			cur := map[string]int{}
			for _, d := range list {
				cur[d.RuntimeInstanceIdPrefix]++
			}
			mu.Lock()
			for p, c := range cur {
				seen[p] = max(seen[p], c)
			}
			mu.Unlock()
		}
	}()
	return func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]int{}
			for k, v := range seen {
				out[k] = v
			}
			return out
		}, func() {
			close(done)
			<-finished
		}
}

func TestTenancy_scaleOutFromZeroAndIsolation(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: b})
			putSeedTenants(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(chain("naps", "sleep", 3, "    with: {duration: 20ms}\n")))
			require.NoError(t, err)
			maxSeen, stop := instanceCounter(t, n.Store())
			// A burst per tenant: far more runs than one instance's slots.
			var runs []*messages.SharedRun
			for i := 0; i < 15; i++ {
				for _, tenant := range []string{"tenant-a", "tenant-b", "default"} {
					r, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "naps", Snapshot: tenantSnap(tenant)})
					require.NoError(t, err)
					runs = append(runs, r)
				}
			}
			for _, r := range runs {
				done, err := n.Await(ctx, r.SharedRunId)
				require.NoError(t, err)
				require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
				switch done.TenantId {
				case "tenant-a":
					require.True(t, strings.HasPrefix(done.AssignedRuntimeInstanceId, "tenant-a-runtime-"), "dedicated tenant-a ran on %s", done.AssignedRuntimeInstanceId)
				case "tenant-b":
					ok := strings.HasPrefix(done.AssignedRuntimeInstanceId, "tenant-b-runtime-") || strings.HasPrefix(done.AssignedRuntimeInstanceId, "runtime-instance-")
					require.True(t, ok, "hybrid tenant-b ran on %s", done.AssignedRuntimeInstanceId)
				case "default":
					require.True(t, strings.HasPrefix(done.AssignedRuntimeInstanceId, "runtime-instance-"), "shared tenant ran on %s", done.AssignedRuntimeInstanceId)
				}
			}
			stop()
			seen := maxSeen()
			require.LessOrEqual(t, seen["tenant-a-runtime"], 3, "tenant-a MaxRuntimeInstances")
			require.LessOrEqual(t, seen["tenant-b-runtime"], 2, "tenant-b MaxRuntimeInstances")
			require.LessOrEqual(t, seen["runtime-instance"], 1, "shared MaxRuntimeInstances")
			ids := map[string]bool{}
			list, err := n.ListInstances(ctx)
			require.NoError(t, err)
			for _, d := range list {
				ids[d.RuntimeInstanceId] = true
			}
			for _, want := range []string{"runtime-instance-1", "tenant-a-runtime-1", "tenant-b-runtime-1"} {
				require.True(t, ids[want], "scale-out did not create %s (have %v)", want, ids)
			}
		})
	}
}

func TestTenancy_hybridFallsBackOnlyWhenAllowed(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "allowed", false: "not-allowed"}[allow], func(t *testing.T) {
			n := testkit.StartNode(t, testkit.NodeOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hyb := &messages.TenantSettings{TenantId: "tenant-b", IsolationMode: messages.IsolationHybrid, PreferDedicatedCapacity: true,
				AllowSharedFallback: allow, RuntimeInstanceIdPrefix: "tenant-b-runtime", MaxRuntimeInstances: 1,
				WorkerCountPerInstance: 1, MaxConcurrentRunsPerInstance: 1, LocalQueueCapacity: 10}
			_, err := n.PutTenant(ctx, hyb)
			require.NoError(t, err)
			_, err = n.PutPipeline(ctx, []byte(chain("nap", "sleep", 1, "    with: {duration: 300ms}\n")))
			require.NoError(t, err)
			// Shared capacity exists (created for the default tenant).
			warm, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap", Snapshot: tenantSnap("default")})
			require.NoError(t, err)
			_, err = n.Await(ctx, warm.SharedRunId)
			require.NoError(t, err)
			first, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap", Snapshot: tenantSnap("tenant-b")})
			require.NoError(t, err)
			testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
				r, err := n.GetRun(ctx, first.SharedRunId)
				return err == nil && r.Status == messages.RunRunning
			}, "first hybrid run running on its own instance")
			second, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap", Snapshot: tenantSnap("tenant-b")})
			require.NoError(t, err)
			done, err := n.Await(ctx, second.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunSucceeded, done.Status)
			if allow {
				require.Equal(t, "runtime-instance-1", done.AssignedRuntimeInstanceId, "hybrid with fallback should use shared capacity while its own is busy")
			} else {
				require.Equal(t, "tenant-b-runtime-1", done.AssignedRuntimeInstanceId, "hybrid without fallback must wait for its own capacity")
			}
		})
	}
}
