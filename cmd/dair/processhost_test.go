package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/hostmanager"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// burstPipeline is a short two-step pipeline for bursts.
const burstPipeline = `key: burst
steps:
  - id: a
    uses: echo
    with: {value: "a"}
  - id: b
    uses: sleep
    needs: [a]
    with: {duration: 20ms}
`

// serveProc is a serving dair process started by startServeTB (usable from benchmarks).
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	logs   *syncBuffer
	exited chan error
	data   string // the data directory of a control plane (process host logs under data/hosts)
}

// startServeTB starts a serving dair command on a free HTTP port and waits for /readyz.
func startServeTB(tb testing.TB, args ...string) *serveProc {
	tb.Helper()
	addr := testkit.FreeAddr(tb)
	p := &serveProc{url: "http://" + addr, logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(dairBin, append(args, "--http", addr, "--log-level", "warn")...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	require.NoError(tb, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	tb.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.kill(tb)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(tb, client.New(p.url, "").WaitReady(ctx, 20*time.Millisecond), "not ready; logs:\n%s", p.logs.String())
	return p
}

// kill sends SIGKILL and waits for the exit (once).
func (p *serveProc) kill(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Logf("kill: %v", err)
	}
	err := <-p.exited
	p.exited <- err
}

// stop sends SIGTERM (a clean shutdown: the node stops its process hosts) and waits for the
// exit (once).
func (p *serveProc) stop(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Logf("stop: %v", err)
	}
	err := <-p.exited
	p.exited <- err
}

// startProcessControlPlane starts a control-plane-only node whose scale-out spawns process hosts.
func startProcessControlPlane(tb testing.TB, storeURL, data string, extra ...string) *serveProc {
	tb.Helper()
	args := append([]string{"node", "--store", storeURL, "--node-id", "cp", "--bind", testkit.FreeAddr(tb), "--cluster-profile", "local",
		"--roles", "control-plane", "--host-mode", "process", "--data", data}, extra...)
	p := startServeTB(tb, args...)
	p.data = data
	return p
}

// hostProc is one process host found in /proc.
type hostProc struct {
	instance string
	pid      int
}

// hostProcs lists the process hosts (dair children with --instance) using storeURL.
func hostProcs(tb testing.TB, storeURL string) []hostProc {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(tb, err)
	var out []hostProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // the process exited meanwhile
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if argValue(args, "--store") == storeURL && argValue(args, "--instance") != "" {
			out = append(out, hostProc{instance: argValue(args, "--instance"), pid: pid})
		}
	}
	return out
}

func argValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// waitNoHosts waits until no process host of storeURL is left (they must not outlive the node
// whose process hosts log under dataDir). A failure names the hosts still alive (pid and
// instance) with the end of their logs.
func waitNoHosts(t *testing.T, storeURL, dataDir string) {
	t.Helper()
	start := time.Now()
	testkit.EventuallyErr(t, 20*time.Second, func() error {
		left := hostProcs(t, storeURL)
		if len(left) == 0 {
			return nil
		}
		var b strings.Builder
		for _, p := range left {
			fmt.Fprintf(&b, "\n  pid %d (instance %s) is alive; end of its log:\n%s", p.pid, p.instance,
				logTail(filepath.Join(dataDir, "hosts", hostmanager.HostID(p.instance)+".log"), 15))
		}
		return fmt.Errorf("%d process hosts outlived their control plane:%s", len(left), b.String())
	}, "process hosts exited with their control plane")
	t.Logf("process hosts exited %s after their control plane", time.Since(start).Round(time.Millisecond))
}

// logTail returns the last n lines of the file at path (or why it cannot).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

func openRedisStore(t testing.TB, url string) store.Store {
	t.Helper()
	st, err := redisstore.Open(context.Background(), redisstore.Options{URL: url})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// instancePrefix returns the prefix of a "<prefix>-<n>" id.
func instancePrefix(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// TestProcessHost_scaleOutFromZero: from zero capacity, a burst of 200 runs of the seed tenants
// makes the control plane spawn process hosts: tenant-a-runtime-1.., tenant-b-runtime-1..,
// runtime-instance-1.., each served by a child (host id host-<instance>); no prefix ever
// exceeds its MaxRuntimeInstances; every run succeeds on an instance its tenant may use.
func TestProcessHost_scaleOutFromZero(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := startProcessControlPlane(t, r.URL(), t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s", cp.logs.String())
		}
	})
	c := client.New(cp.url, "")
	limits := map[string]int{}
	for _, ts := range tenancy.SeedTenants() {
		_, err := c.PutTenant(ctx, tenantOf(ts))
		require.NoError(t, err)
		limits[ts.RuntimeInstanceIdPrefix] = int(ts.MaxRuntimeInstances)
	}
	_, err := c.PutPipeline(ctx, "burst", []byte(burstPipeline))
	require.NoError(t, err)
	st := openRedisStore(t, r.URL())
	list, err := st.ListInstances(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "zero capacity at start")

	// Sample the registry every 10 ms while the burst runs.
	var mu sync.Mutex // guards maxSeen, hostOf
	maxSeen, hostOf := map[string]int{}, map[string]string{}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			insts, err := st.ListInstances(ctx)
			if err != nil {
				continue
			}
			count := map[string]int{}
			mu.Lock()
			for _, d := range insts {
				if d.Status == messages.InstanceStopped {
					continue
				}
				count[instancePrefix(d.RuntimeInstanceId)]++
				hostOf[d.RuntimeInstanceId] = d.HostId
			}
			for p, n := range count {
				maxSeen[p] = max(maxSeen[p], n)
			}
			mu.Unlock()
		}
	}()

	tenants := []string{"tenant-a", "tenant-b", "default"}
	type sub struct{ id, tenant string }
	subs := make([]sub, 200)
	var wg sync.WaitGroup
	errs := make(chan error, len(subs))
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(subs); i += 8 {
				s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "burst", TenantID: tenants[i%3]})
				if err != nil {
					errs <- err
					return
				}
				subs[i] = sub{s.SharedRunID, tenants[i%3]}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.id
	}
	done := waitAll(t, ctx, c, ids, 2*time.Minute)
	close(stop)
	<-sampled

	for _, s := range subs {
		run := done[s.id]
		require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", s.id, run.FailureReason)
		require.True(t, allowedInstance(s.tenant, run.AssignedRuntimeInstanceID), "run %s of %s on %s", s.id, s.tenant,
			run.AssignedRuntimeInstanceID)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("max instances seen per prefix: %v; hosts: %v", maxSeen, hostOf)
	for prefix, n := range maxSeen {
		limit, ok := limits[prefix]
		require.True(t, ok, "unexpected prefix %s", prefix)
		require.LessOrEqual(t, n, limit, "prefix %s exceeded MaxRuntimeInstances", prefix)
	}
	for _, id := range []string{"tenant-a-runtime-1", "tenant-b-runtime-1", "runtime-instance-1"} {
		require.Equal(t, "host-"+id, hostOf[id], "instance %s served by a process host", id)
	}
	for id, host := range hostOf {
		require.Equal(t, "host-"+id, host, "instance %s not on its own process host", id)
	}
	procs := map[string]bool{}
	for _, p := range hostProcs(t, r.URL()) {
		procs[p.instance] = true
	}
	for _, id := range []string{"tenant-a-runtime-1", "tenant-b-runtime-1", "runtime-instance-1"} {
		require.True(t, procs[id], "no child process for %s (have %v)", id, procs)
	}
	cp.kill(t)
	waitNoHosts(t, r.URL(), cp.data)
}

// soloTenant is a dedicated tenant with one runtime instance at most, so a lost instance can
// only be replaced by new capacity.
func soloTenant() httpapi.Tenant {
	return httpapi.Tenant{TenantID: "solo", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIDPrefix: "solo-runtime",
		MaxRuntimeInstances: 1, WorkerCountPerInstance: 20, MaxConcurrentRunsPerInstance: 10, LocalQueueCapacity: 100}
}

// TestProcessHost_killedHostRunsResume: the process host running a tenant's runs is SIGKILLed
// mid-run; the manager reports the exit, recovery requeues the runs, a replacement host is
// spawned, and every run succeeds with each step committed exactly once.
func TestProcessHost_killedHostRunsResume(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	cs := newCountingServer(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := startProcessControlPlane(t, r.URL(), t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane log:\n%s", cp.logs.String())
		}
	})
	c := client.New(cp.url, "")
	_, err := c.PutTenant(ctx, soloTenant())
	require.NoError(t, err)
	_, err = c.PutPipeline(ctx, "crashy", []byte(httpChain(cs.URL, 10, false)))
	require.NoError(t, err)
	var ids []string
	for i := 0; i < 8; i++ {
		s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "crashy", TenantID: "solo"})
		require.NoError(t, err)
		ids = append(ids, s.SharedRunID)
	}
	testkit.Eventually(t, 60*time.Second, 20*time.Millisecond, func() bool {
		list, err := c.ListInstances(ctx, "")
		if err != nil {
			return false
		}
		for _, in := range list.Instances {
			if in.RuntimeInstanceID == "solo-runtime-1" && in.RunningRunCount >= 4 {
				return true
			}
		}
		return false
	}, "solo-runtime-1 busy")
	procs := hostProcs(t, r.URL())
	require.Len(t, procs, 1)
	victim := procs[0]
	require.Equal(t, "solo-runtime-1", victim.instance)
	require.NoError(t, syscall.Kill(victim.pid, syscall.SIGKILL))
	killedAt := time.Now()

	done := waitAll(t, ctx, c, ids, 2*time.Minute)
	t.Logf("all runs finished %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	require.Contains(t, cp.logs.String(), "runtime host exited unexpectedly")
	st := openRedisStore(t, r.URL())
	recovered := 0
	for _, id := range ids {
		run := done[id]
		require.Equal(t, messages.RunSucceeded, run.Status, "run %s: %s", id, run.FailureReason)
		entries, err := st.ReadLedger(ctx, id, 0, 0)
		require.NoError(t, err)
		succ := map[string]int{}
		sawRecovery, redispatched := false, false
		for _, e := range entries {
			switch e.Kind {
			case messages.KindStepSucceeded:
				succ[e.StepId]++
			case messages.KindRecovery:
				sawRecovery = true
			case messages.KindDispatch:
				redispatched = redispatched || sawRecovery
			}
		}
		require.Len(t, succ, 10, "run %s", id)
		for step, k := range succ {
			require.Equal(t, 1, k, "run %s step %s committed %d times", id, step, k)
		}
		if sawRecovery {
			recovered++
			require.True(t, redispatched, "run %s recovered but never dispatched again", id)
		}
	}
	require.Positive(t, recovered, "no run was recovered: the kill hit nothing")
	procs = hostProcs(t, r.URL())
	require.Len(t, procs, 1, "one replacement host")
	// The lost id is reused only once nothing references it any more (recovery fences by id),
	// so the replacement may be solo-runtime-1 again or the next id.
	require.True(t, strings.HasPrefix(procs[0].instance, "solo-runtime-"), "replacement %s", procs[0].instance)
	require.NotEqual(t, victim.pid, procs[0].pid, "the runs finished on replacement capacity")
	t.Logf("%d of %d runs recovered onto the replacement host (pid %d → %d)", recovered, len(ids), victim.pid, procs[0].pid)
	cp.kill(t)
	waitNoHosts(t, r.URL(), cp.data)
}

// TestProcessHost_controlPlaneKilledWhileProvisioning: the control plane is SIGKILLed while a
// scale-out request is Provisioning (its host spawn is delayed); after a restart on the same
// store the request is fulfilled exactly once (one instance, one process host, status
// fulfilled) and its runs complete.
func TestProcessHost_controlPlaneKilledWhileProvisioning(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data := t.TempDir()
	cp := startProcessControlPlane(t, r.URL(), data, "--host-start-delay", "5s")
	c := client.New(cp.url, "")
	_, err := c.PutTenant(ctx, soloTenant())
	require.NoError(t, err)
	_, err = c.PutPipeline(ctx, "burst", []byte(burstPipeline))
	require.NoError(t, err)
	var ids []string
	for i := 0; i < 3; i++ {
		s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "burst", TenantID: "solo"})
		require.NoError(t, err)
		ids = append(ids, s.SharedRunID)
	}
	st := openRedisStore(t, r.URL())
	var req *messages.ScaleOutRequest
	testkit.Eventually(t, 20*time.Second, 5*time.Millisecond, func() bool {
		reqs, err := st.ListScaleOuts(ctx, messages.ScaleOutProvisioning)
		if err != nil || len(reqs) == 0 {
			return false
		}
		req = reqs[0]
		return true
	}, "scale-out request provisioning")
	cp.kill(t)
	require.Empty(t, hostProcs(t, r.URL()), "the delayed host had not been spawned")

	cp2 := startProcessControlPlane(t, r.URL(), data)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("first control plane log:\n%s\nrestarted control plane log:\n%s", cp.logs.String(), cp2.logs.String())
		}
	})
	c = client.New(cp2.url, "")
	done := waitAll(t, ctx, c, ids, 90*time.Second)
	for _, id := range ids {
		require.Equal(t, messages.RunSucceeded, done[id].Status, "run %s: %s", id, done[id].FailureReason)
		require.Equal(t, "solo-runtime-1", done[id].AssignedRuntimeInstanceID)
	}
	got, err := st.GetScaleOut(ctx, req.RequestId)
	require.NoError(t, err)
	require.Equal(t, messages.ScaleOutFulfilled, got.Status)
	require.Equal(t, []string{"solo-runtime-1"}, got.RuntimeInstanceIds, "one instance created for the request")
	all, err := st.ListScaleOuts(ctx)
	require.NoError(t, err)
	fulfilled := 0
	for _, x := range all {
		if x.GetSettings().GetTenantId() == "solo" && x.Status == messages.ScaleOutFulfilled {
			fulfilled++
		}
	}
	require.Equal(t, 1, fulfilled, "exactly one fulfilled scale-out for the scope")
	insts, err := st.ListInstances(ctx)
	require.NoError(t, err)
	require.Len(t, insts, 1)
	require.Equal(t, "host-solo-runtime-1", insts[0].HostId)
	procs := hostProcs(t, r.URL())
	require.Len(t, procs, 1, "one process host")
	for _, id := range ids {
		entries, err := st.ReadLedger(ctx, id, 0, 0)
		require.NoError(t, err)
		n := 0
		for _, e := range entries {
			if e.Kind == messages.KindScaleOutFulfilled {
				n++
			}
		}
		require.LessOrEqual(t, n, 1, "run %s saw the scale-out fulfilled %d times", id, n)
	}
	t.Logf("request %s fulfilled after %d attempts", got.RequestId, got.Attempts)
	cp2.kill(t)
	waitNoHosts(t, r.URL(), cp2.data)
}
