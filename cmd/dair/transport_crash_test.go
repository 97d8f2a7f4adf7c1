package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// hostTransports are the transports process hosts serve, one crash scenario each.
var hostTransports = []string{"actor", "http", "grpc", "redis-command-queue"}

// dedicatedTenant is a dedicated tenant with one runtime instance at most, so its lost
// instance can only be replaced by new capacity.
func dedicatedTenant(id string) httpapi.Tenant {
	return httpapi.Tenant{TenantID: id, IsolationMode: messages.IsolationDedicated, RuntimeInstanceIDPrefix: id + "-runtime",
		MaxRuntimeInstances: 1, WorkerCountPerInstance: 20, MaxConcurrentRunsPerInstance: 10, LocalQueueCapacity: 100}
}

// crashScenario is the provider-agnostic crash-recovery scenario base: a control plane whose
// scale-out spawns process hosts serving transport, tenants whose runs start from zero
// capacity, and the host of the impacted tenant killed with SIGKILL mid-run.
type crashScenario struct {
	transport string
	impacted  string   // the tenant whose host is killed
	safe      []string // tenants whose runs must not be touched
	runs      int      // runs per tenant
}

// TestTransport_crashRecovery runs the crash scenario base for every host transport: a
// single-tenant scenario, then a two-tenant variant where the impacted tenant recovers and the
// safe tenant's runs are not touched. The transports run in parallel on one Redis (one
// database each) and one built binary.
func TestTransport_crashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	for i, transport := range hostTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			t.Run("single-tenant", func(t *testing.T) {
				s := crashScenario{transport: transport, impacted: "solo", runs: 6}
				s.run(t, fmt.Sprintf("redis://%s/%d", r.Addr(), 2*i))
			})
			t.Run("two-tenant", func(t *testing.T) {
				s := crashScenario{transport: transport, impacted: "impacted", safe: []string{"safe"}, runs: 4}
				s.run(t, fmt.Sprintf("redis://%s/%d", r.Addr(), 2*i+1))
			})
		})
	}
}

// run plays the scenario on the store at storeURL.
func (s crashScenario) run(t *testing.T, storeURL string) {
	cs := newCountingServer(t, 60*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := startProcessControlPlane(t, storeURL, t.TempDir(), "--host-transport", s.transport, "--runtime-call-timeout", "2s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s", cp.logs.String())
		}
	})
	c := client.New(cp.url, "")
	byTenant := s.submit(t, ctx, c, cs.URL)
	k := s.kill(t, ctx, c, storeURL, byTenant[s.impacted])
	calls := cs.snapshot()
	var all []string
	for _, ids := range byTenant {
		all = append(all, ids...)
	}
	done := waitAll(t, ctx, c, all, 2*time.Minute)
	t.Logf("%s: every run finished %s after the kill", s.transport, time.Since(k.at).Round(time.Millisecond))
	after := cs.snapshot()
	for key := range k.committed {
		require.Equal(t, calls[key], after[key], "step %s had committed before the kill and was called again", key)
	}
	recovered := 0
	for _, id := range byTenant[s.impacted] {
		if s.checkRun(t, ctx, c, done[id], k.before[id], true) {
			recovered++
		}
	}
	require.Positive(t, recovered, "no run was recovered: the kill hit nothing")
	for _, tenant := range s.safe {
		for _, id := range byTenant[tenant] {
			require.False(t, s.checkRun(t, ctx, c, done[id], nil, false), "safe tenant %s run %s was recovered", tenant, id)
			require.Equal(t, tenant+"-runtime-1", done[id].AssignedRuntimeInstanceID)
		}
	}
	s.checkHosts(t, storeURL, k)
	t.Logf("%s: %d of %d runs of %s recovered onto replacement capacity", s.transport, recovered, len(byTenant[s.impacted]), s.impacted)
	// The process hosts end with their control plane: stopped cleanly (single-tenant) or
	// killed (two-tenant: the kernel's parent-death signal stops them).
	if len(s.safe) == 0 {
		cp.stop(t)
	} else {
		cp.kill(t)
	}
	waitNoHosts(t, storeURL, cp.data)
}

// submit stores the pipeline and the tenants and submits their runs; it returns the run ids by
// tenant.
func (s crashScenario) submit(t *testing.T, ctx context.Context, c *client.Client, url string) map[string][]string {
	_, err := c.PutPipeline(ctx, "crashy", []byte(httpChain(url, 10, false)))
	require.NoError(t, err)
	byTenant := map[string][]string{}
	for _, tenant := range append([]string{s.impacted}, s.safe...) {
		_, err := c.PutTenant(ctx, dedicatedTenant(tenant))
		require.NoError(t, err)
		for range s.runs {
			sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "crashy", TenantID: tenant})
			require.NoError(t, err)
			byTenant[tenant] = append(byTenant[tenant], sub.SharedRunID)
		}
	}
	return byTenant
}

// killed is what the scenario knew when it killed the impacted host.
type killed struct {
	at        time.Time
	victim    int                     // the killed host's pid
	procs     map[string]int          // process host pid by instance, before the kill
	before    map[string]*httpapi.Run // the impacted runs before the kill
	committed map[string]bool         // "<execution>/<step>" committed before the kill
}

// kill waits until the impacted host (and the safe ones) run work, then SIGKILLs the impacted
// host and reads what had committed.
func (s crashScenario) kill(t *testing.T, ctx context.Context, c *client.Client, storeURL string, impacted []string) killed {
	busy := func(id string, n int32) func() bool {
		return func() bool {
			list, err := c.ListInstances(ctx, "")
			if err != nil {
				return false
			}
			for _, in := range list.Instances {
				if in.RuntimeInstanceID == id && in.RunningRunCount >= n {
					return in.ProviderName == s.transport
				}
			}
			return false
		}
	}
	victimID := s.impacted + "-runtime-1"
	testkit.Eventually(t, 90*time.Second, 20*time.Millisecond, busy(victimID, int32(min(s.runs, 3))), "%s busy", victimID)
	for _, tenant := range s.safe {
		testkit.Eventually(t, 60*time.Second, 20*time.Millisecond, busy(tenant+"-runtime-1", 1), "%s busy", tenant)
	}
	k := killed{procs: map[string]int{}, before: map[string]*httpapi.Run{}, committed: map[string]bool{}}
	for _, p := range hostProcs(t, storeURL) {
		k.procs[p.instance] = p.pid
	}
	victim, ok := k.procs[victimID]
	require.True(t, ok, "no process host for %s (have %v)", victimID, k.procs)
	for _, id := range impacted {
		run, err := c.GetRun(ctx, id)
		require.NoError(t, err)
		k.before[id] = run
	}
	require.NoError(t, syscall.Kill(victim, syscall.SIGKILL))
	k.at, k.victim = time.Now(), victim
	st := openRedisStore(t, storeURL)
	for _, run := range k.before {
		if run.ExecutionID == "" {
			continue
		}
		_, steps, err := st.GetExecution(ctx, run.ExecutionID)
		require.NoError(t, err)
		for _, step := range steps {
			if step.Status == messages.StepSucceeded {
				k.committed[run.ExecutionID+"/"+step.StepId] = true
			}
		}
	}
	return k
}

// checkHosts checks that the safe tenants kept their hosts and the impacted tenant got a
// replacement host.
func (s crashScenario) checkHosts(t *testing.T, storeURL string, k killed) {
	now := map[string]int{}
	for _, p := range hostProcs(t, storeURL) {
		now[p.instance] = p.pid
	}
	for _, tenant := range s.safe {
		require.Equal(t, k.procs[tenant+"-runtime-1"], now[tenant+"-runtime-1"], "the safe tenant's host was replaced")
	}
	replaced := false
	for id, pid := range now {
		if strings.HasPrefix(id, s.impacted+"-runtime-") && pid != k.victim {
			replaced = true
		}
	}
	require.True(t, replaced, "no replacement host for %s (hosts %v)", s.impacted, now)
}

// checkRun checks one finished run: it succeeded, every step succeeded exactly once in its
// ledger, a resumed run kept its ExecutionId, was dispatched again through the scenario's
// provider after its recovery, and its trace and replay agree. It reports whether the run was
// recovered.
func (s crashScenario) checkRun(t *testing.T, ctx context.Context, c *client.Client, run, before *httpapi.Run, impacted bool) bool {
	t.Helper()
	require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", run.SharedRunID, run.FailureReason)
	if before != nil && before.ExecutionID != "" {
		require.Equal(t, before.ExecutionID, run.ExecutionID, "run %s resumed under another ExecutionId", run.SharedRunID)
	}
	led, err := c.Ledger(ctx, run.ExecutionID)
	require.NoError(t, err)
	succ := map[string]int{}
	recovered, redispatched := false, false
	provider := s.transport
	for _, e := range led.Entries {
		switch e.Kind {
		case messages.KindStepSucceeded:
			succ[e.StepID]++
		case messages.KindRecovery:
			recovered = true
		case messages.KindDispatch:
			require.Contains(t, string(e.Data), `"provider":"`+provider+`"`, "run %s dispatched through another provider", run.SharedRunID)
			redispatched = redispatched || recovered
		}
	}
	require.Len(t, succ, 10, "run %s", run.SharedRunID)
	for step, k := range succ {
		require.Equal(t, 1, k, "run %s step %s committed %d times", run.SharedRunID, step, k)
	}
	if recovered {
		require.True(t, impacted, "run %s of a safe tenant was recovered", run.SharedRunID)
		require.True(t, redispatched, "run %s recovered but never dispatched again", run.SharedRunID)
	}
	tr, err := c.Trace(ctx, run.ExecutionID)
	require.NoError(t, err)
	require.NotEmpty(t, tr.Spans)
	rp, err := c.Replay(ctx, run.ExecutionID)
	require.NoError(t, err)
	require.False(t, rp.Diverged, "run %s replay diverged: %+v", run.SharedRunID, rp.Divergences)
	return recovered
}
