package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// holdPipeline keeps an execution in flight: a quick step, then a ten-minute sleep.
const holdPipeline = `key: hold
steps:
  - id: hello
    uses: echo
    with: {value: "hi"}
  - id: nap
    uses: sleep
    needs: [hello]
    with: {duration: 10m}
`

const echoPipeline = `key: one
steps:
  - id: hello
    uses: echo
    with: {value: "hi"}
`

// recoveryInFlight is how many executions a recovery trial submits; the kill comes once
// recoveryReady of them run. A trial whose executions have not all resumed recoveryStall after
// the kill has stalled. The trial reads the ledgers every recoveryPoll.
const (
	recoveryInFlight = 1000
	recoveryReady    = 980
	recoveryStall    = time.Minute
	recoveryPoll     = 10 * time.Millisecond
)

// recoveryResult is one recovery trial that got as far as the kill.
type recoveryResult struct {
	took    time.Duration  // kill → last execution resumed; recoveryStall when stalled
	held    int            // executions the victim held at the kill
	stalled int            // of held, not resumed recoveryStall after the kill (0: recovered)
	detail  string         // where the stalled executions stood
	phases  recoveryPhases // where the time went (recovered trials)
}

// BenchmarkClusterRecovery measures, over several trials on a fresh 3-node process cluster
// each, the time from SIGKILLing the node that holds the most of ~1,000 in-flight executions
// until every execution it held has resumed on a survivor (its run's ledger shows a recovery
// entry "resumed-from-committed-steps"). /local uses the tuned failure-detection profile, /lan
// memberlist's LAN defaults, and /paused the LAN defaults with the node SIGSTOPped instead of
// killed (it keeps its connections open, so only dair's liveness check can tell); 5 trials
// each. Targets (issue 9): p50 ≤ 1.5 s, max ≤ 2.5 s on every sub-benchmark.
//
// Every trial that reaches the kill counts. A trial whose recovery stalled (not every execution
// resumed a minute after the kill) is a failed trial: it is counted in stalled-trials, logged
// with where its executions stood, and left out of p50-ns and max-ns, which are over the
// recovered trials only. A trial whose setup failed before the kill (the cluster never got
// recoveryReady executions running) says nothing about recovery: it is counted in
// setup-failures and run again (at most twice per sub-benchmark). Reports p50-ns, max-ns,
// resumed/trial (over recovered trials), recovered-trials, stalled-trials and setup-failures.
// Each recovered trial logs where its time went (recoveryPhases), and one slower than 1.5 s the
// history of the run that resumed last; wrong-verdicts counts the survivors' log lines that
// declared a member other than the victim lost (a live node taken for lost, which must stay
// 0). A trial slower than 2.5 s, or every trial with DAIR_BENCH_KEEP_LOGS set, keeps its
// nodes' logs in a temporary directory.
func BenchmarkClusterRecovery(b *testing.B) {
	if testing.Short() {
		b.Skip("multi-process cluster benchmark")
	}
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{})
	db := 0
	for _, tc := range []struct {
		name, profile string
		pause         bool
		trials        int
	}{{"local", "local", false, 5}, {"lan", "lan", false, 5}, {"paused", "lan", true, 5}} {
		b.Run(tc.name, func(b *testing.B) {
			var (
				took                            []time.Duration
				resumed, stalled, setups, wrong int
			)
			for i := 0; i < tc.trials; {
				db = db%15 + 1 // a fresh key space per trial: Redis has 16, emptied before reuse
				if err := flushDB(r.Addr(), db); err != nil {
					b.Fatalf("empty redis db %d: %v", db, err)
				}
				url := fmt.Sprintf("redis://%s/%d", r.Addr(), db)
				res, err := recoveryTrial(b, url, tc.profile, tc.pause)
				if err != nil {
					if setups++; setups > 2 {
						b.Fatalf("trial %d (%s): setup failed %d times, last: %v", i+1, tc.name, setups, err)
					}
					b.Logf("trial %d (%s): setup failed, run again: %v", i+1, tc.name, err)
					continue
				}
				i++
				if res.stalled > 0 {
					stalled++
					b.Logf("trial %d (%s): FAILED: recovery stalled: %d of %d executions not resumed %s after the kill: %s",
						i, tc.name, res.stalled, res.held, recoveryStall, res.detail)
					continue
				}
				b.Logf("trial %d (%s): %d executions resumed elsewhere %s after the fault (%s)", i, tc.name, res.held, res.took.Round(time.Millisecond), res.phases)
				took = append(took, res.took)
				resumed += res.held
				wrong += res.phases.wrongVerdicts
			}
			if len(took) > 0 {
				slices.Sort(took)
				b.ReportMetric(float64(took[(len(took)-1)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(took[len(took)-1].Nanoseconds()), "max-ns")
				b.ReportMetric(float64(resumed)/float64(len(took)), "resumed/trial")
			}
			b.ReportMetric(float64(len(took)), "recovered-trials")
			b.ReportMetric(float64(stalled), "stalled-trials")
			b.ReportMetric(float64(setups), "setup-failures")
			b.ReportMetric(float64(wrong), "wrong-verdicts")
		})
	}
}

// recoveryTrial runs one trial on the store at url and returns the time from the kill (pause:
// the SIGSTOP) until every execution of the victim resumed and how many there were, or, when
// recovery stalled, how many had not resumed recoveryStall after the kill. It returns an error
// only when the setup failed: the cluster did not get recoveryReady executions running within
// 30 s.
func recoveryTrial(b *testing.B, url, profile string, pause bool) (recoveryResult, error) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc := testkit.StartProcessCluster(b, testkit.ProcessClusterOptions{Binary: dairBin, N: 3, RedisURL: url, Profile: profile})
	defer pc.Close()
	pc.WaitTopology(3)
	st, err := redisstore.Open(ctx, redisstore.Options{URL: url})
	if err != nil {
		b.Fatalf("open store: %v", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			b.Errorf("close store: %v", err)
		}
	}()
	const tenant = "bench"
	c := pc.Node(0).Client()
	if _, err := c.PutTenant(ctx, httpapi.Tenant{TenantID: tenant, IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIDPrefix: "bench-runtime", MaxRuntimeInstances: 6, WorkerCountPerInstance: 350,
		MaxConcurrentRunsPerInstance: 350, LocalQueueCapacity: 1000}); err != nil {
		b.Fatalf("put tenant: %v", err)
	}
	if _, err := c.PutPipeline(ctx, "hold", []byte(holdPipeline)); err != nil {
		b.Fatalf("put pipeline: %v", err)
	}
	submitMany(b, ctx, pc, tenant, "hold", recoveryInFlight)
	victim, after, err := pickVictim(b, ctx, st, pc, tenant)
	if err != nil {
		return recoveryResult{}, err
	}
	held := len(after)
	seqs := maps.Clone(after)
	member, err := victim.MemberID(ctx)
	if err != nil {
		b.Fatalf("victim's member id: %v", err)
	}

	killed := time.Now()
	if pause {
		victim.Stop()
		defer victim.Cont()
	} else {
		victim.Kill()
	}
	if err := waitResumedSince(ctx, st, after, killed); err != nil {
		if !errors.Is(err, errStalled) {
			b.Fatalf("wait for recovery: %v", err)
		}
		return recoveryResult{took: recoveryStall, held: held, stalled: len(after), detail: stuckRuns(ctx, st, after)}, nil
	}
	took := time.Since(killed)
	phases := measurePhases(ctx, st, pc, victim, member, killed, seqs)
	if took > 1500*time.Millisecond {
		b.Logf("the run that resumed last: %s", phases.last)
	}
	if took > 2500*time.Millisecond || os.Getenv("DAIR_BENCH_KEEP_LOGS") != "" {
		keepLogs(b, pc)
	}
	return recoveryResult{took: took, held: held, phases: phases}, nil
}

// pickVictim waits until recoveryReady executions run (an error after 30 s: the setup failed)
// and returns the node holding the most of them, with the last ledger seq of each run it holds.
func pickVictim(b *testing.B, ctx context.Context, st *redisstore.Store, pc *testkit.ProcessCluster, tenant string) (*testkit.ProcessNode, map[string]int64, error) {
	b.Helper()
	submitted := time.Now()
	var insts []*messages.CapacityDescriptor
	if err := testkit.WaitFor(ctx, 50*time.Millisecond, func() (bool, error) {
		if time.Since(submitted) > 30*time.Second {
			return false, fmt.Errorf("fewer than %d executions running after 30s (registry: %s)", recoveryReady, describeInstances(insts))
		}
		var err error
		if insts, err = st.ListInstances(ctx); err != nil {
			return false, nil
		}
		total := int32(0)
		for _, d := range insts {
			total += d.RunningRunCount
		}
		return total >= recoveryReady, nil
	}); err != nil {
		return nil, nil, err
	}
	load := map[string]int32{}
	for _, d := range insts {
		load[d.HostId] += d.RunningRunCount
	}
	victim := pc.Node(0)
	for _, n := range pc.Nodes() {
		if load[n.ID()] > load[victim.ID()] {
			victim = n
		}
	}
	onVictim := map[string]bool{}
	for _, d := range insts {
		if d.HostId == victim.ID() {
			onVictim[d.RuntimeInstanceId] = true
		}
	}
	running, err := st.ListRuns(ctx, store.RunFilter{TenantID: tenant, Status: messages.RunRunning, Limit: 2 * recoveryInFlight})
	if err != nil {
		b.Fatalf("list runs: %v", err)
	}
	after := map[string]int64{} // run id → last ledger seq before the kill
	for _, run := range running {
		if !onVictim[run.AssignedRuntimeInstanceId] {
			continue
		}
		entries, err := st.ReadLedger(ctx, run.SharedRunId, 0, 0)
		if err != nil {
			b.Fatalf("read ledger: %v", err)
		}
		if len(entries) > 0 {
			after[run.SharedRunId] = entries[len(entries)-1].Seq
		}
	}
	if len(after) == 0 {
		b.Fatalf("the victim %s holds no execution", victim.ID())
	}
	return victim, after, nil
}

// waitResumedSince waits until every run of after (run id → ledger seq to read from) has a
// recovery entry "resumed-from-committed-steps", removing each from after as it resumes; it
// returns errStalled recoveryStall after the fault. One pipelined read of every ledger not
// yet resumed per poll: the harness must not take the CPU the recovery it measures needs (a
// read per run per poll took a third of it).
func waitResumedSince(ctx context.Context, st *redisstore.Store, after map[string]int64, fault time.Time) error {
	return testkit.WaitFor(ctx, recoveryPoll, func() (bool, error) {
		if time.Since(fault) > recoveryStall {
			return false, errStalled
		}
		news, err := st.ReadLedgers(ctx, after)
		if err != nil {
			return false, nil
		}
		for id, entries := range news {
			for _, e := range entries {
				if e.Kind == messages.KindRecovery && e.Reason == "resumed-from-committed-steps" {
					delete(after, id)
					break
				}
				after[id] = e.Seq
			}
		}
		return len(after) == 0, nil
	})
}

// flushDB empties database db of the Redis at addr.
func flushDB(addr string, db int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	err := c.FlushDB(context.Background()).Err()
	return errors.Join(err, c.Close())
}

// keepLogs writes the nodes' logs of a slow trial to files that outlive the benchmark and
// logs where they are.
func keepLogs(b *testing.B, pc *testkit.ProcessCluster) {
	dir, err := os.MkdirTemp("", "dair-recovery-")
	if err != nil {
		b.Logf("keep logs: %v", err)
		return
	}
	for _, n := range pc.Nodes() {
		if err := os.WriteFile(filepath.Join(dir, n.ID()+".log"), []byte(n.Logs()), 0o600); err != nil {
			b.Logf("keep logs: %v", err)
		}
	}
	b.Logf("slow trial: node logs in %s", dir)
}

// errStalled ends the wait of a trial whose recovery stalled.
var errStalled = errors.New("recovery stalled")

// stuckRuns describes where the runs of ids stand: status, instance and last ledger entries.
func stuckRuns(ctx context.Context, st store.Store, ids map[string]int64) string {
	var stuck []string
	for id := range ids {
		run, err := st.GetRun(ctx, id)
		if err != nil {
			stuck = append(stuck, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		entries, err := st.ReadLedger(ctx, id, 0, 0)
		if err != nil {
			stuck = append(stuck, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		var kinds []string
		for _, e := range entries[max(0, len(entries)-6):] {
			kinds = append(kinds, e.Kind+"/"+e.Reason)
		}
		stuck = append(stuck, fmt.Sprintf("%s %s on %s recovery=%v last=%v", id, run.Status, run.AssignedRuntimeInstanceId, run.Recovery, kinds))
	}
	return strings.Join(stuck, "; ")
}

// describeInstances lists descriptors as id@host:running.
func describeInstances(insts []*messages.CapacityDescriptor) string {
	var b strings.Builder
	for _, d := range insts {
		fmt.Fprintf(&b, "%s@%s:%d ", d.RuntimeInstanceId, d.HostId, d.RunningRunCount)
	}
	return strings.TrimSpace(b.String())
}

// submitMany submits n runs of pipeline for tenant, spread over the reachable nodes, with 16
// concurrent clients.
func submitMany(b *testing.B, ctx context.Context, pc *testkit.ProcessCluster, tenant, pipeline string, n int) {
	b.Helper()
	nodes := pc.Reachable()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := nodes[i%len(nodes)].Client().Submit(ctx, httpapi.SubmitRequest{Pipeline: pipeline, TenantID: tenant}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("submit: %v", err)
	}
}

// BenchmarkSubmitToFirstStepCrossNode measures submit → first step_started across nodes: the
// run is submitted through node A's HTTP API (control plane only) for a tenant whose only
// instance lives on node B (runtime only); the ledger is read from the store directly.
// Each iteration is one sequential submission; reports p50-ns and p99-ns over the b.N
// samples of the final round, and runs/s.
func BenchmarkSubmitToFirstStepCrossNode(b *testing.B) {
	if testing.Short() {
		b.Skip("multi-process cluster benchmark")
	}
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc := testkit.StartProcessCluster(b, testkit.ProcessClusterOptions{Binary: dairBin, N: 2, RedisURL: r.URL(),
		NodeIDs: []string{"a", "b"}, Roles: [][]string{{actors.RoleControlPlane}, {actors.RoleRuntime}}})
	pc.WaitTopology(2)
	st, err := redisstore.Open(ctx, redisstore.Options{URL: r.URL()})
	if err != nil {
		b.Fatalf("open store: %v", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			b.Errorf("close store: %v", err)
		}
	}()
	const tenant = "xnode"
	a := pc.Node(0).Client()
	if _, err := a.PutTenant(ctx, httpapi.Tenant{TenantID: tenant, IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIDPrefix: "xnode-runtime", MaxRuntimeInstances: 1, WorkerCountPerInstance: 16,
		MaxConcurrentRunsPerInstance: 16, LocalQueueCapacity: 100}); err != nil {
		b.Fatalf("put tenant: %v", err)
	}
	if _, err := a.PutPipeline(ctx, "one", []byte(echoPipeline)); err != nil {
		b.Fatalf("put pipeline: %v", err)
	}
	// Warm up: the first run scales the tenant out onto node B.
	firstStep(b, ctx, a, st, tenant)
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		took = append(took, firstStep(b, ctx, a, st, tenant))
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	slices.Sort(took)
	b.ReportMetric(float64(took[(len(took)-1)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[(len(took)-1)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(len(took))/elapsed.Seconds(), "runs/s")
}

// firstStep submits one run through c and returns the time until its first step_started
// ledger entry, polling the store.
func firstStep(b *testing.B, ctx context.Context, c *client.Client, st *redisstore.Store, tenant string) time.Duration {
	b.Helper()
	t0 := time.Now()
	s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "one", TenantID: tenant})
	if err != nil {
		b.Fatalf("submit: %v", err)
	}
	var seq int64
	var at time.Duration
	testkit.Eventually(b, time.Minute, 200*time.Microsecond, func() bool {
		entries, err := st.ReadLedger(ctx, s.SharedRunID, seq, 0)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if e.Kind == messages.KindStepStarted {
				at = time.Since(t0)
				return true
			}
			seq = e.Seq
		}
		return false
	}, "first step of %s started", s.SharedRunID)
	return at
}
