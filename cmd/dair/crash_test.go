package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// countingServer answers each request after delay and counts requests per Idempotency-Key.
type countingServer struct {
	*httptest.Server
	delay time.Duration
	mu    sync.Mutex // guards calls
	calls map[string]int
}

func newCountingServer(t *testing.T, delay time.Duration) *countingServer {
	cs := &countingServer{delay: delay, calls: map[string]int{}}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		cs.mu.Lock()
		cs.calls[key]++
		cs.mu.Unlock()
		t := time.NewTimer(cs.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"key":%q}`, key)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *countingServer) snapshot() map[string]int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[string]int, len(cs.calls))
	for k, v := range cs.calls {
		out[k] = v
	}
	return out
}

// httpChain is the pipeline "crashy": a chain of n http steps to url. With echoes, each http
// step is followed by a pure echo step that reads its status, which the next http step needs
// (2n steps, half of them released before their commits land).
func httpChain(url string, n int, echoes bool) string {
	var b strings.Builder
	b.WriteString("key: crashy\nsteps:\n")
	prev := ""
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: s%02d\n    uses: http\n    with: {url: %q}\n    retry: {max_attempts: 5, backoff: 50ms}\n", i, url)
		if prev != "" {
			fmt.Fprintf(&b, "    needs: [%s]\n", prev)
		}
		prev = fmt.Sprintf("s%02d", i)
		if echoes {
			fmt.Fprintf(&b, "  - id: e%02d\n    uses: echo\n    needs: [%s]\n    with: {value: \"{{ .steps.%s.output.status }}\"}\n", i, prev, prev)
			prev = fmt.Sprintf("e%02d", i)
		}
	}
	return b.String()
}

// startServe starts a serving dair command and waits for /readyz.
func startServe(t *testing.T, args ...string) *devNode {
	t.Helper()
	addr := testkit.FreeAddr(t)
	n := &devNode{url: "http://" + addr, logs: &syncBuffer{}, exited: make(chan error, 1)}
	n.cmd = exec.Command(dairBin, append(args, "--http", addr, "--log-level", "warn")...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	require.NoError(t, n.cmd.Start())
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() {
		if n.cmd.ProcessState == nil {
			if err := n.cmd.Process.Kill(); err != nil {
				t.Logf("kill child: %v", err)
			}
			<-n.exited
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, client.New(n.url, "").WaitReady(ctx, 20*time.Millisecond), "not ready; logs:\n%s", n.logs.String())
	return n
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *devNode) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(syscall.SIGKILL))
	err := <-n.exited
	n.exited <- err
}

// TestCrash_sigkillMidRunResumesExactlyOnce: a node process running a 20-step pipeline (100 ms
// http steps to a counting server; in the second shape, every other step a pure echo) is
// SIGKILLed mid-run and restarted on the same store; the run completes with the same
// ExecutionId, the ledger shows each step succeeded exactly once, and no step committed before
// the kill is called again.
func TestCrash_sigkillMidRunResumesExactlyOnce(t *testing.T) {
	for _, backend := range testkit.Backends {
		t.Run(string(backend), func(t *testing.T) {
			for _, shape := range []struct {
				name  string
				chain func(url string) string
			}{
				{"http", func(url string) string { return httpChain(url, 20, false) }},
				{"http and echo", func(url string) string { return httpChain(url, 10, true) }},
			} {
				t.Run(shape.name, func(t *testing.T) { sigkillMidRun(t, backend, shape.chain) })
			}
		})
	}
}

// sigkillMidRun is TestCrash_sigkillMidRunResumesExactlyOnce on backend for the 20-step
// pipeline chain(url of the counting server) gives.
func sigkillMidRun(t *testing.T, backend testkit.Backend, chain func(url string) string) {
	cs := newCountingServer(t, 100*time.Millisecond)
	var args []string
	var open func() store.Store
	data := t.TempDir()
	switch backend {
	case testkit.BackendEmbedded:
		args = []string{"dev", "--data", data}
		open = func() store.Store {
			st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(data, "dair.db")})
			require.NoError(t, err)
			return st
		}
	case testkit.BackendRedis:
		testkit.RequireRedis(t)
		r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
		args = []string{"node", "--store", r.URL(), "--node-id", "crash-node"}
		open = func() store.Store {
			st, err := redisstore.Open(context.Background(), redisstore.Options{URL: r.URL()})
			require.NoError(t, err)
			return st
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := startServe(t, args...)
	c := client.New(node.url, "")
	_, err := c.PutPipeline(ctx, "crashy", []byte(chain(cs.URL)))
	require.NoError(t, err)
	sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "crashy", TenantID: "acme"})
	require.NoError(t, err)

	var before *httpapi.Run
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		run, err := c.GetRun(ctx, sub.SharedRunID)
		if err != nil {
			return false
		}
		before = run
		done := 0
		for _, s := range run.Steps {
			if s.Status == messages.StepSucceeded {
				done++
			}
		}
		return done >= 6
	}, "six steps committed")
	node.kill(t)
	callsAtKill := cs.snapshot()

	// What had durably committed before the kill, read from the store itself.
	st := open()
	_, steps, err := st.GetExecution(ctx, before.ExecutionID)
	require.NoError(t, err)
	committed := map[string]bool{}
	for _, s := range steps {
		if s.Status == messages.StepSucceeded {
			committed[s.StepId] = true
		}
	}
	require.NoError(t, st.Close())
	require.GreaterOrEqual(t, len(committed), 6)
	require.Less(t, len(committed), 20, "the run finished before the kill; the test proves nothing")

	node = startServe(t, args...)
	c = client.New(node.url, "")
	var final *httpapi.Run
	testkit.Eventually(t, 60*time.Second, 50*time.Millisecond, func() bool {
		run, err := c.GetRun(ctx, sub.SharedRunID)
		if err != nil {
			return false
		}
		final = run
		return messages.IsTerminalRun(run.Status)
	}, "run finished after restart")
	require.Equal(t, messages.RunSucceeded, final.Status, final.FailureReason)
	require.Equal(t, before.ExecutionID, final.ExecutionID, "the run resumed under another ExecutionId")

	led, err := c.Ledger(ctx, final.ExecutionID)
	require.NoError(t, err)
	succeeded := map[string]int{}
	recovered := false
	for _, e := range led.Entries {
		if e.Kind == messages.KindStepSucceeded {
			succeeded[e.StepID]++
		}
		if e.Kind == messages.KindRecovery {
			recovered = true
		}
	}
	require.True(t, recovered, "no recovery entry in the ledger")
	require.Len(t, succeeded, 20)
	for id, k := range succeeded {
		require.Equal(t, 1, k, "step %s succeeded %d times in the ledger", id, k)
	}
	after := cs.snapshot()
	for id := range committed {
		key := final.ExecutionID + "/" + id
		require.Equal(t, callsAtKill[key], after[key], "step %s had committed before the kill and was called again", id)
	}
	require.Equal(t, 0, node.stop(t))
}
