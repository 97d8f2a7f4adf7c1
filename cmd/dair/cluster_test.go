package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// startCluster starts n `dair node` processes (every role, tuned failure detection) on r
// through the testkit harness and waits until they all see each other.
func startCluster(t *testing.T, r *testkit.Redis, n int) *testkit.ProcessCluster {
	t.Helper()
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: n, RedisURL: r.URL()})
	pc.WaitTopology(n)
	return pc
}

func tenantOf(ts *messages.TenantSettings) httpapi.Tenant {
	return httpapi.Tenant{TenantID: ts.TenantId, TenantGroupID: ts.TenantGroupId, IsolationMode: ts.IsolationMode,
		PreferDedicatedCapacity: ts.PreferDedicatedCapacity, AllowSharedFallback: ts.AllowSharedFallback,
		RuntimeInstanceIDPrefix: ts.RuntimeInstanceIdPrefix, MaxRuntimeInstances: ts.MaxRuntimeInstances,
		WorkerCountPerInstance: ts.WorkerCountPerInstance, MaxConcurrentRunsPerInstance: ts.MaxConcurrentRunsPerInstance,
		LocalQueueCapacity: ts.LocalQueueCapacity}
}

// allowedInstance reports whether a tenant's run may run on instance id (seed tenants).
func allowedInstance(tenant, id string) bool {
	switch tenant {
	case "tenant-a":
		return strings.HasPrefix(id, "tenant-a-runtime-")
	case "tenant-b":
		return strings.HasPrefix(id, "tenant-b-runtime-") || strings.HasPrefix(id, "runtime-instance-")
	default:
		return strings.HasPrefix(id, "runtime-instance-")
	}
}

// TestCluster_killNodeWithMostExecutions: 3 process nodes, 3 tenants (Dedicated/Hybrid/Shared),
// 150 runs × 20 steps; SIGKILL the node holding the most executions mid-run → every run
// succeeds with its ExecutionId, no step committed twice, no cross-tenant placement, and no
// step committed before the kill invoked again.
func TestCluster_killNodeWithMostExecutions(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "everysec"})
	cs := newCountingServer(t, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	pc := startCluster(t, r, 3)
	nodes := pc.Nodes()
	c := pc.Node(0).Client()
	for _, ts := range tenancy.SeedTenants() {
		_, err := c.PutTenant(ctx, tenantOf(ts))
		require.NoError(t, err)
	}
	_, err := c.PutPipeline(ctx, "crashy", []byte(httpChain(cs.URL, 20, false)))
	require.NoError(t, err)

	tenants := []string{"tenant-a", "tenant-b", "default"}
	type sub struct{ id, tenant string }
	var subs []sub
	for i := 0; i < 150; i++ {
		tenant := tenants[i%3]
		node := nodes[i%3]
		s, err := node.Client().Submit(ctx, httpapi.SubmitRequest{Pipeline: "crashy", TenantID: tenant})
		require.NoError(t, err)
		subs = append(subs, sub{s.SharedRunID, tenant})
	}

	// Wait until the cluster is busy, then kill the node holding the most executions.
	var victim *testkit.ProcessNode
	testkit.Eventually(t, 60*time.Second, 50*time.Millisecond, func() bool {
		b, total := busiest(ctx, c, nodes)
		victim = b
		return total >= 10
	}, "cluster busy")
	st, err := redisstore.Open(ctx, redisstore.Options{URL: r.URL()})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	victim.Kill()
	killedAt := time.Now()
	// Read what has committed first, then the call counts: every step in the committed set was
	// invoked before the counts were taken, so any later call of it is a second invocation.
	execBefore := map[string]string{}
	committed := map[string]bool{} // "<execution>/<step>"
	for _, s := range subs {
		run, err := st.GetRun(ctx, s.id)
		require.NoError(t, err)
		if run.ExecutionId == "" {
			continue
		}
		execBefore[s.id] = run.ExecutionId
		_, steps, err := st.GetExecution(ctx, run.ExecutionId)
		require.NoError(t, err)
		for _, stp := range steps {
			if stp.Status == messages.StepSucceeded {
				committed[run.ExecutionId+"/"+stp.StepId] = true
			}
		}
	}
	callsAtKill := cs.snapshot()
	c = pc.Reachable()[0].Client()
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.id
	}
	done := waitAll(t, ctx, c, ids, 3*time.Minute)
	t.Logf("all runs finished %s after the kill", time.Since(killedAt).Round(time.Millisecond))

	recovered := 0
	for _, s := range subs {
		run := done[s.id]
		require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", s.id, run.FailureReason)
		if before, ok := execBefore[s.id]; ok {
			require.Equal(t, before, run.ExecutionID, "run %s changed ExecutionId", s.id)
		}
		led, err := c.Ledger(ctx, run.ExecutionID)
		require.NoError(t, err)
		succ := map[string]int{}
		for _, e := range led.Entries {
			switch e.Kind {
			case messages.KindStepSucceeded:
				succ[e.StepID]++
			case messages.KindDispatch:
				require.True(t, allowedInstance(s.tenant, e.RuntimeInstanceID), "run %s of %s dispatched to %s", s.id, s.tenant, e.RuntimeInstanceID)
			case messages.KindRecovery:
				recovered++
			}
		}
		require.Len(t, succ, 20, "run %s", s.id)
		for id, k := range succ {
			require.Equal(t, 1, k, "run %s step %s committed %d times", s.id, id, k)
		}
	}
	require.Greater(t, recovered, 0, "no run was recovered: the kill hit nothing")
	after := cs.snapshot()
	for key := range committed {
		require.Equal(t, callsAtKill[key], after[key], "step %s had committed before the kill and was invoked again", key)
	}
	t.Logf("killed %s; %d recovery entries; %d steps committed before the kill", victim.ID(), recovered, len(committed))
}

// busiest returns the node whose instances run the most runs, and the total running.
func busiest(ctx context.Context, c *client.Client, nodes []*testkit.ProcessNode) (*testkit.ProcessNode, int32) {
	list, err := c.ListInstances(ctx, "")
	if err != nil {
		return nil, 0
	}
	load := map[string]int32{}
	total := int32(0)
	for _, in := range list.Instances {
		load[in.HostID] += in.RunningRunCount
		total += in.RunningRunCount
	}
	var best *testkit.ProcessNode
	for _, n := range nodes {
		if best == nil || load[n.ID()] > load[best.ID()] {
			best = n
		}
	}
	return best, total
}

func acmeTenant() httpapi.Tenant {
	return httpapi.Tenant{TenantID: "acme", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIDPrefix: "acme-runtime",
		MaxRuntimeInstances: 3, WorkerCountPerInstance: 20, MaxConcurrentRunsPerInstance: 10, LocalQueueCapacity: 100}
}

// waitAll polls until every run is final and returns them.
func waitAll(t *testing.T, ctx context.Context, c *client.Client, ids []string, within time.Duration) map[string]*httpapi.Run {
	t.Helper()
	done := map[string]*httpapi.Run{}
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	err := testkit.WaitFor(wctx, 100*time.Millisecond, func() (bool, error) {
		for _, id := range ids {
			if _, ok := done[id]; ok {
				continue
			}
			run, err := c.GetRun(ctx, id)
			if err != nil || !messages.IsTerminalRun(run.Status) {
				return false, nil
			}
			done[id] = run
		}
		return true, nil
	})
	if err != nil {
		// Say where the unfinished runs are stuck before failing.
		shown, unfinished := 0, 0
		for _, id := range ids {
			if _, ok := done[id]; ok {
				continue
			}
			if run, err := c.GetRun(ctx, id); err == nil && !messages.IsTerminalRun(run.Status) {
				unfinished++
				done := 0
				for _, st := range run.Steps {
					if st.Status == messages.StepSucceeded {
						done++
					}
				}
				t.Logf("unfinished run %s: status %s, instance %s, execution %s, %d steps succeeded, reason %q", id, run.Status,
					run.AssignedRuntimeInstanceID, run.ExecutionID, done, run.FailureReason)
				if shown < 5 {
					shown++
					if led, err := c.Ledger(ctx, id); err == nil {
						from := max(0, len(led.Entries)-6)
						for _, e := range led.Entries[from:] {
							t.Logf("    ledger %d %s %s instance %s step %s epoch %d %s", e.Seq, e.At.Format("15:04:05.000"), e.Kind,
								e.RuntimeInstanceID, e.StepID, e.Epoch, e.Reason)
						}
					}
				}
			}
		}
		if l, err := c.ListInstances(ctx, ""); err == nil {
			for _, in := range l.Instances {
				t.Logf("instance %s on %s: %s, paused %v, draining %v, slots %d", in.RuntimeInstanceID, in.HostID, in.Status, in.IsQueuePaused,
					in.IsDraining, in.AvailableRunSlots)
			}
		}
		t.Fatalf("%d of %d runs did not finish within %v: %v", unfinished, len(ids), within, err)
	}
	return done
}

// busy is a busy 3-node process cluster (see busyCluster).
type busy struct {
	pc     *testkit.ProcessCluster
	redis  *testkit.Redis
	calls  *countingServer // the http steps' server: counts handler calls per "<execution>/<step>"
	c      *client.Client  // a client of node 0
	ids    []string        // the runs
	victim *testkit.ProcessNode
}

// busyCluster starts a 3-node process cluster, submits 30 runs of a 20-step http pipeline
// (steps take stepDelay) for the dedicated tenant acme, and waits until at least 10 run; the
// victim is the node holding the most runs.
func busyCluster(t *testing.T, ctx context.Context, stepDelay time.Duration) *busy {
	t.Helper()
	testkit.RequireRedis(t)
	b := &busy{redis: testkit.StartRedis(t, testkit.RedisOptions{}), calls: newCountingServer(t, stepDelay)}
	b.pc = startCluster(t, b.redis, 3)
	b.c = b.pc.Node(0).Client()
	_, err := b.c.PutTenant(ctx, acmeTenant())
	require.NoError(t, err)
	_, err = b.c.PutPipeline(ctx, "crashy", []byte(httpChain(b.calls.URL, 20, false)))
	require.NoError(t, err)
	for i := 0; i < 30; i++ {
		s, err := b.c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "crashy", TenantID: "acme"})
		require.NoError(t, err)
		b.ids = append(b.ids, s.SharedRunID)
	}
	testkit.Eventually(t, 60*time.Second, 50*time.Millisecond, func() bool {
		v, total := busiest(ctx, b.c, b.pc.Nodes())
		b.victim = v
		return total >= 10
	}, "cluster busy")
	return b
}

// heldExecution is an execution of a paused node as it stood once the survivors had fenced it:
// the paused activation's epoch, its step records, its run's ledger length and the handler
// calls of each of its steps.
type heldExecution struct {
	runID, execID string
	epoch         int64
	steps         map[string]*messages.StepState
	ledger        int
	calls         map[string]int // by step id
}

// heldBy returns the live executions whose runtime instance is in instances, at their current
// epoch. Call it while the node holding them is frozen.
func heldBy(t *testing.T, ctx context.Context, st store.Store, ids []string, instances map[string]bool) []*heldExecution {
	t.Helper()
	var held []*heldExecution
	for _, id := range ids {
		run, err := st.GetRun(ctx, id)
		require.NoError(t, err)
		if run.ExecutionId == "" {
			continue
		}
		x, _, err := st.GetExecution(ctx, run.ExecutionId)
		require.NoError(t, err)
		if instances[x.RuntimeInstanceId] && !messages.IsTerminalRun(x.Status) {
			held = append(held, &heldExecution{runID: id, execID: x.ExecutionId, epoch: x.Epoch})
		}
	}
	return held
}

// mark records h's step records and ledger length. Read the handler calls (markCalls) after
// marking every execution: a step committed at the mark has then been called already.
func (h *heldExecution) mark(t *testing.T, ctx context.Context, st store.Store) {
	t.Helper()
	_, steps, err := st.GetExecution(ctx, h.execID)
	require.NoError(t, err)
	h.steps = map[string]*messages.StepState{}
	for _, s := range steps {
		h.steps[s.StepId] = s
	}
	led, err := st.ReadLedger(ctx, h.runID, 0, 0)
	require.NoError(t, err)
	h.ledger = len(led)
}

// markCalls records h's handler calls; calls is keyed "<execution>/<step>".
func (h *heldExecution) markCalls(calls map[string]int) {
	h.calls = map[string]int{}
	for i := 1; i <= 20; i++ {
		id := fmt.Sprintf("s%02d", i)
		h.calls[id] = calls[h.execID+"/"+id]
	}
}

// requireNothingAdded reports every step record, ledger entry (both carry the writer's epoch)
// and handler call that the fenced activation added after the mark, then fails. Of the 20-step
// chain, a step not succeeded at the mark may be called once by the activation that replaced
// it, and the step the fenced activation was at (the first it had not committed) once more: its
// attempt in flight at the fence, whose commit must be refused. That step may have been
// committed by the new owner before the mark.
func (h *heldExecution) requireNothingAdded(t *testing.T, ctx context.Context, st store.Store, calls map[string]int) {
	t.Helper()
	_, steps, err := st.GetExecution(ctx, h.execID)
	require.NoError(t, err)
	for _, s := range steps {
		if s.Epoch == h.epoch {
			before, ok := h.steps[s.StepId]
			assert.True(t, ok && proto.Equal(before, s), "run %s: the fenced activation (epoch %d) wrote step %s after the fence: %v (at the fence: %v)",
				h.runID, h.epoch, s.StepId, s, before)
		}
	}
	led, err := st.ReadLedger(ctx, h.runID, int64(h.ledger), 0)
	require.NoError(t, err)
	for _, e := range led {
		assert.NotEqual(t, h.epoch, e.Epoch, "run %s: the fenced activation (epoch %d) appended %s of step %q after the fence", h.runID, h.epoch, e.Kind, e.StepId)
	}
	final := map[string]*messages.StepState{}
	for _, s := range steps {
		final[s.StepId] = s
	}
	var chain []string // for the failure message: step status@epoch at the mark → at the end, calls
	inFlight := ""
	for i := 1; i <= 20; i++ {
		id := fmt.Sprintf("s%02d", i)
		extra := calls[h.execID+"/"+id] - h.calls[id]
		chain = append(chain, fmt.Sprintf("%s %s@%d→%s@%d calls %d+%d", id, h.steps[id].GetStatus(), h.steps[id].GetEpoch(),
			final[id].GetStatus(), final[id].GetEpoch(), h.calls[id], extra))
		allowed := 0
		if s := h.steps[id]; s.GetStatus() != messages.StepSucceeded {
			allowed++ // the new owner
		}
		if inFlight == "" && !(h.steps[id].GetStatus() == messages.StepSucceeded && h.steps[id].GetEpoch() <= h.epoch) {
			inFlight = id
			allowed++ // the fenced activation's attempt in flight
		}
		assert.LessOrEqual(t, extra, allowed, "run %s: step %s was called %d times after the fence (in flight at the fence: %v; record at the fence: %v)",
			h.runID, id, extra, id == inFlight, h.steps[id])
	}
	if t.Failed() {
		t.Fatalf("run %s, execution %s, fenced activation at epoch %d: %s", h.runID, h.execID, h.epoch, strings.Join(chain, "; "))
	}
}

// TestCluster_pausedNodeIsFencedAndRejoins: a node SIGSTOPped past the failure timeout and then
// resumed cannot commit: once the survivors have fenced its executions (bumped their epochs),
// it adds no step record, no ledger entry and no handler call to them (beyond the attempt in
// flight at the fence, whose commit is refused); it stops its stale executions and restarts
// under a new member id; the runs still finish exactly once.
func TestCluster_pausedNodeIsFencedAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bc := busyCluster(t, ctx, 40*time.Millisecond)
	pc, c, ids, victim := bc.pc, bc.c, bc.ids, bc.victim
	nodes := pc.Nodes()
	list, err := c.ListInstances(ctx, "")
	require.NoError(t, err)
	onVictim := map[string]bool{}
	for _, in := range list.Instances {
		if in.HostID == victim.ID() {
			onVictim[in.RuntimeInstanceID] = true
		}
	}
	st, err := redisstore.Open(ctx, redisstore.Options{URL: bc.redis.URL()})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()

	victim.Stop()
	held := heldBy(t, ctx, st, ids, onVictim)
	require.NotEmpty(t, held, "the paused node held no execution")
	c = pc.Reachable()[0].Client()
	// The survivors declare it dead: its instances leave the registry.
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		list, err := c.ListInstances(ctx, "")
		if err != nil {
			return false
		}
		for _, in := range list.Instances {
			if in.HostID == victim.ID() {
				return false
			}
		}
		return true
	}, "paused node's instances marked unsafe")
	// Keep it paused past the failure timeout: the survivors' membership reports it lost.
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		for _, n := range nodes {
			if n != victim && strings.Contains(n.Logs(), "cluster member lost") {
				return true
			}
		}
		return false
	}, "membership declared the paused node lost")
	// Recovery fences every execution it held; mark each while the node is still frozen.
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		for _, h := range held {
			x, _, err := st.GetExecution(ctx, h.execID)
			if err != nil || x.Epoch == h.epoch {
				return false
			}
		}
		return true
	}, "recovery fenced the paused node's executions")
	for _, h := range held {
		h.mark(t, ctx, st)
	}
	calls := bc.calls.snapshot()
	for _, h := range held {
		h.markCalls(calls)
	}
	victim.Cont()
	done := waitAll(t, ctx, c, ids, 2*time.Minute)
	for _, id := range ids {
		run := done[id]
		require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", id, run.FailureReason)
		led, err := c.Ledger(ctx, run.ExecutionID)
		require.NoError(t, err)
		succ := map[string]int{}
		for _, e := range led.Entries {
			if e.Kind == messages.KindStepSucceeded {
				succ[e.StepID]++
			}
		}
		require.Len(t, succ, 20)
		for step, k := range succ {
			require.Equal(t, 1, k, "run %s step %s committed %d times", id, step, k)
		}
	}
	// The resumed node learns it was declared dead and comes back under a new member id.
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(victim.Logs(), "restarting under a new member id")
	}, "paused node restarted under a new member id")
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		return victim.Client().Ready(ctx) == nil
	}, "restarted node ready")
	pc.WaitTopology(3)
	// Its old activations are gone with the restart: nothing of theirs can land after this.
	calls = bc.calls.snapshot()
	for _, h := range held {
		h.requireNothingAdded(t, ctx, st, calls)
	}
	t.Logf("paused %s holding %d executions; none added anything after its fence", victim.ID(), len(held))
}

// TestCluster_killedNodeRejoinsAndGetsWork: a node killed and restarted on the same address
// joins as a new member and receives new work.
func TestCluster_killedNodeRejoinsAndGetsWork(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc := startCluster(t, r, 2)
	c := pc.Node(0).Client()
	_, err := c.PutPipeline(ctx, "hello", []byte(helloPipeline))
	require.NoError(t, err)
	pc.Node(1).Kill()
	pc.Node(1).Restart()
	pc.WaitTopology(2)
	// New tenants scale out onto the least-loaded runtime member: the restarted node.
	var ids []string
	for i := 0; i < 3; i++ {
		tn := acmeTenant()
		tn.TenantID, tn.RuntimeInstanceIDPrefix = fmt.Sprintf("t%d", i), fmt.Sprintf("t%d-runtime", i)
		_, err := c.PutTenant(ctx, tn)
		require.NoError(t, err)
		s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "hello", TenantID: tn.TenantID, Input: []byte(`{"name":"x"}`)})
		require.NoError(t, err)
		ids = append(ids, s.SharedRunID)
	}
	done := waitAll(t, ctx, c, ids, time.Minute)
	list, err := c.ListInstances(ctx, "")
	require.NoError(t, err)
	onN2 := map[string]bool{}
	for _, in := range list.Instances {
		if in.HostID == "n2" {
			onN2[in.RuntimeInstanceID] = true
		}
	}
	got := 0
	for _, id := range ids {
		require.Equal(t, messages.RunSucceeded, done[id].Status)
		if onN2[done[id].AssignedRuntimeInstanceID] {
			got++
		}
	}
	require.Greater(t, got, 0, "the restarted node received no work (instances on n2: %v)", onN2)

	// The CLI lists the members and names each instance's node.
	members := dair(t, "--server", pc.Node(0).URL(), "cluster", "members")
	require.Equal(t, 0, members.code, members.stderr)
	require.Regexp(t, `(?m)^n1\s`, members.stdout)
	require.Regexp(t, `(?m)^n2\s`, members.stdout)
	insts := dair(t, "--server", pc.Node(0).URL(), "instances", "list")
	require.Equal(t, 0, insts.code, insts.stderr)
	require.Regexp(t, `(?m)^ID\s+NODE\s`, insts.stdout)
	require.Regexp(t, `(?m)^t\d-runtime-\S+\s+n2\s`, insts.stdout)
}

// TestCluster_partitionedNodeRunsMoveAndItRejoins: the node holding the most executions is cut
// off from the membership (the fault-injecting transport drops all its gossip): its instances
// leave the registry, its runs move to the majority (recovery entries; they finish elsewhere)
// and every run finishes with each step committed exactly once; once healed it is back in the
// cluster under a new member id.
func TestCluster_partitionedNodeRunsMoveAndItRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bc := busyCluster(t, ctx, 200*time.Millisecond)
	pc, c, ids, victim := bc.pc, bc.c, bc.ids, bc.victim
	memberBefore, err := victim.MemberID(ctx)
	require.NoError(t, err)
	// Which runs the victim holds now: they must move.
	list, err := c.ListInstances(ctx, "")
	require.NoError(t, err)
	onVictim := map[string]bool{}
	for _, in := range list.Instances {
		if in.HostID == victim.ID() {
			onVictim[in.RuntimeInstanceID] = true
		}
	}
	held := map[string]bool{}
	for _, id := range ids {
		run, err := c.GetRun(ctx, id)
		require.NoError(t, err)
		if run.Status == messages.RunRunning && onVictim[run.AssignedRuntimeInstanceID] {
			held[id] = true
		}
	}
	victim.Partition()
	c = pc.Reachable()[0].Client()
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		list, err := c.ListInstances(ctx, "")
		if err != nil {
			return false
		}
		for _, in := range list.Instances {
			if in.HostID == victim.ID() {
				return false
			}
		}
		return true
	}, "partitioned node's instances marked unsafe")
	done := waitAll(t, ctx, c, ids, 2*time.Minute)
	// Instance ids are reused by scale-out: where an instance lives now is in the registry.
	list, err = c.ListInstances(ctx, "")
	require.NoError(t, err)
	hostOf := map[string]string{}
	for _, in := range list.Instances {
		hostOf[in.RuntimeInstanceID] = in.HostID
	}
	movedRuns := map[string]bool{}
	for _, id := range ids {
		run := done[id]
		require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", id, run.FailureReason)
		ledgers, err := pc.Ledgers(ctx, id)
		require.NoError(t, err)
		for node, led := range ledgers {
			succ := map[string]int{}
			recovered := false
			for _, e := range led.Entries {
				switch e.Kind {
				case messages.KindStepSucceeded:
					succ[e.StepID]++
				case messages.KindRecovery:
					recovered = true
				}
			}
			require.Len(t, succ, 20, "run %s seen by %s", id, node)
			for step, k := range succ {
				require.Equal(t, 1, k, "run %s step %s committed %d times (seen by %s)", id, step, k, node)
			}
			if held[id] && recovered {
				require.NotEqual(t, victim.ID(), hostOf[run.AssignedRuntimeInstanceID], "run %s recovered but finished on the partitioned node", id)
				movedRuns[id] = true
			}
		}
	}
	moved := len(movedRuns)
	require.Greater(t, moved, 0, "the partitioned node held no run")
	victim.Heal()
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(victim.Logs(), "restarting under a new member id")
	}, "partitioned node restarted under a new member id")
	pc.WaitTopology(3)
	memberAfter, err := victim.MemberID(ctx)
	require.NoError(t, err)
	require.NotEqual(t, memberBefore, memberAfter, "the healed node kept its member id")
	t.Logf("partitioned %s (member %s → %s); %d of its runs moved", victim.ID(), memberBefore, memberAfter, moved)
}
