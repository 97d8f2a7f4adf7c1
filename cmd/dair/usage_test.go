package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// usageFaults is the process cluster of TestCluster_usageEqualsLedgerUnderFaults.
type usageFaults struct {
	t     *testing.T
	ctx   context.Context
	pc    *testkit.ProcessCluster
	redis *testkit.Redis
	ids   []string
}

// submit submits n runs of the 20-step chain for acme through a reachable node.
func (u *usageFaults) submit(n int) {
	u.t.Helper()
	c := u.pc.Reachable()[0].Client()
	for i := 0; i < n; i++ {
		s, err := c.Submit(u.ctx, httpapi.SubmitRequest{Pipeline: "crashy", TenantID: "acme"})
		require.NoError(u.t, err)
		u.ids = append(u.ids, s.SharedRunID)
	}
}

// busiest waits until at least atLeast runs run and returns the node holding the most.
func (u *usageFaults) busiest(atLeast int32) *testkit.ProcessNode {
	u.t.Helper()
	var victim *testkit.ProcessNode
	nodes := u.pc.Reachable()
	c := nodes[0].Client()
	testkit.Eventually(u.t, 60*time.Second, 20*time.Millisecond, func() bool {
		v, total := busiest(u.ctx, c, nodes)
		victim = v
		return total >= atLeast
	}, "cluster busy")
	return victim
}

// retries counts the committer's retried store calls in the logs of the running nodes.
func (u *usageFaults) retries() int {
	n := 0
	for _, node := range u.pc.Nodes() {
		n += strings.Count(node.Logs(), "failed; retrying")
	}
	return n
}

// TestCluster_usageEqualsLedgerUnderFaults: across a node paused past its fence and resumed, a
// Redis outage (killed with steps in flight, restarted on its AOF) and a node killed mid-run,
// GET /v1/tenants/{id}/usage holds exactly one step event per step_succeeded ledger entry of
// each run, and one run event per run. Usage written beside the commit instead of by it counted
// the paused node's fenced successes twice and lost the events of the outage and of the kill.
func TestCluster_usageEqualsLedgerUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
	cs := newCountingServer(t, 40*time.Millisecond)
	u := &usageFaults{t: t, ctx: ctx, pc: startCluster(t, r, 3), redis: r}
	c := u.pc.Node(0).Client()
	_, err := c.PutTenant(ctx, acmeTenant())
	require.NoError(t, err)
	_, err = c.PutPipeline(ctx, "crashy", []byte(httpChain(cs.URL, 20, false)))
	require.NoError(t, err)

	// Pause: the busiest node is frozen until the survivors declare it lost, then resumed (its
	// attempts in flight finish and their commits are fenced).
	u.submit(30)
	paused := u.busiest(10)
	paused.Stop()
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		for _, n := range u.pc.Nodes() {
			if n != paused && strings.Contains(n.Logs(), "cluster member lost") {
				return true
			}
		}
		return false
	}, "membership declared the paused node lost")
	paused.Cont()
	// Declared lost, it rejoins under a new member id: ready only after that (it may answer
	// ready for a moment after SIGCONT, before it reads that it was declared dead).
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(paused.Logs(), "restarting under a new member id") && paused.Client().Ready(ctx) == nil
	}, "resumed node rejoined and ready")
	u.pc.WaitTopology(3)

	// Redis outage: killed with steps in flight; restarted once a commit has failed for it.
	u.submit(30)
	u.busiest(10)
	before := u.retries()
	require.NoError(t, r.Kill())
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool { return u.retries() > before },
		"a commit failed while Redis was down")
	require.NoError(t, r.Restart())

	// Kill: the busiest node dies mid-run; its runs resume on the others.
	u.submit(30)
	u.busiest(10).Kill()

	done := waitAll(t, ctx, u.pc.Reachable()[0].Client(), u.ids, 3*time.Minute)
	for _, id := range u.ids {
		require.Equal(t, messages.RunSucceeded, done[id].Status, "run %s: %s", id, done[id].FailureReason)
	}
	steps, committed := u.requireUsageEqualsLedger()
	t.Logf("%d runs, %d step usage events = %d step_succeeded entries (paused %s, killed Redis, then a node)",
		len(u.ids), steps, committed, paused.ID())
}

// requireUsageEqualsLedger compares acme's usage with the ledgers of the runs: per run, one
// step event per step_succeeded entry of each step and one run event. It returns the step
// events and entries counted.
func (u *usageFaults) requireUsageEqualsLedger() (steps int64, committed int) {
	t, ctx := u.t, u.ctx
	st, err := redisstore.Open(ctx, redisstore.Options{URL: u.redis.URL()})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	ledger := map[string]map[string]int{} // run -> step -> step_succeeded entries
	for _, id := range u.ids {
		entries, err := st.ReadLedger(ctx, id, 0, 0)
		require.NoError(t, err)
		ledger[id] = map[string]int{}
		for _, e := range entries {
			if e.Kind == messages.KindStepSucceeded {
				ledger[id][e.StepId]++
				committed++
			}
		}
	}
	rep := tenantUsage(t, ctx, u.pc.Reachable()[0], "acme")
	byRun, runs := map[string]map[string]int{}, map[string]int{}
	for _, ev := range rep.Events {
		switch ev.Kind {
		case "step":
			if byRun[ev.SharedRunID] == nil {
				byRun[ev.SharedRunID] = map[string]int{}
			}
			byRun[ev.SharedRunID][ev.StepID]++
		case "run":
			runs[ev.SharedRunID]++
		}
	}
	var diffs []string
	for _, id := range u.ids {
		if fmt.Sprint(byRun[id]) != fmt.Sprint(ledger[id]) || runs[id] != 1 {
			diffs = append(diffs, fmt.Sprintf("run %s: %d run events, step events %v, ledger %v", id, runs[id], byRun[id], ledger[id]))
		}
	}
	require.Empty(t, diffs[:min(len(diffs), 10)], "%d step usage events for %d step_succeeded entries; %d runs differ",
		rep.Totals.Steps, committed, len(diffs))
	require.Equal(t, int64(committed), rep.Totals.Steps)
	require.Equal(t, int64(len(u.ids)), rep.Totals.Runs)
	return rep.Totals.Steps, committed
}

// tenantUsage reads GET /v1/tenants/{tenant}/usage from n.
func tenantUsage(t *testing.T, ctx context.Context, n *testkit.ProcessNode, tenant string) *httpapi.UsageReport {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/tenants/"+tenant+"/usage", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { require.NoError(t, resp.Body.Close()) }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var rep httpapi.UsageReport
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	return &rep
}
