package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// dairBin is the binary built once by TestMain.
var dairBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dair-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdir temp:", err)
		os.Exit(1)
	}
	dairBin, err = testkit.BuildBinary(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "remove temp:", err)
	}
	os.Exit(code)
}

// result is one finished dair invocation.
type result struct {
	code           int
	stdout, stderr string
}

// dair runs the binary to completion (bounded by 60s) with the given args.
func dair(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dairBin, args...)
	cmd.Env = append(os.Environ(), "DAIR_SERVER=", "DAIR_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// syncBuffer is a goroutine-safe buffer for a child's output.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// devNode is a `dair dev` child process.
type devNode struct {
	cmd    *exec.Cmd
	url    string
	logs   *syncBuffer
	exited chan error
}

// startDev starts `dair dev` (with extra arguments) on a free port and waits until /readyz
// answers 200.
func startDev(t *testing.T, data, pipelines string, extra ...string) *devNode {
	t.Helper()
	addr := testkit.FreeAddr(t)
	n := &devNode{url: "http://" + addr, logs: &syncBuffer{}, exited: make(chan error, 1)}
	args := append([]string{"dev", "--data", data, "--http", addr, "--pipelines", pipelines, "--log-level", "warn"}, extra...)
	n.cmd = exec.Command(dairBin, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	require.NoError(t, n.cmd.Start())
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() {
		if n.cmd.ProcessState == nil {
			if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Logf("kill dev: %v", err)
			}
			select {
			case <-n.exited:
			case <-time.After(10 * time.Second):
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- client.New(n.url, "").WaitReady(ctx, 50*time.Millisecond) }()
	select {
	case err := <-ready:
		require.NoError(t, err, "dev not ready; logs:\n%s", n.logs.String())
	case err := <-n.exited:
		n.exited <- err
		t.Fatalf("dev exited before ready: %v\n%s", err, n.logs.String())
	}
	return n
}

// stop sends SIGTERM and returns the exit code.
func (n *devNode) stop(t *testing.T) int {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-n.exited:
		n.exited <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("dev did not exit after SIGTERM; logs:\n%s", n.logs.String())
		return -1
	}
}

const helloPipeline = `key: hello
steps:
  - id: greet
    uses: echo
    with: {value: "hi {{ .input.name }}"}
  - id: nap
    uses: sleep
    needs: [greet]
    with: {duration: 50ms}
  - id: done
    uses: echo
    needs: [greet]
    with: {value: "done"}
`

const failPipeline = `key: doomed
steps:
  - id: boom
    uses: fail
    with: {times: 5}
`

func pipelinesDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.yaml"), []byte(helloPipeline), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "doomed.yml"), []byte(failPipeline), 0o600))
	return dir
}

func TestDair_Dev_submitWaitRestart(t *testing.T) {
	data, pipes := t.TempDir(), pipelinesDir(t)
	n := startDev(t, data, pipes)
	srv := "--server=" + n.url

	r := dair(t, srv, "submit", "hello", "--tenant", "acme", "--input", `{"name":"ada"}`, "--wait")
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "/3] step nap succeeded")
	require.Contains(t, r.stdout, "3/3 steps succeeded")
	require.NotContains(t, r.stdout, "\033", "no terminal escapes when stdout is not a TTY")
	first := strings.SplitN(r.stdout, "\n", 2)[0]
	runID := strings.TrimSuffix(strings.TrimPrefix(first, "run "), " submitted")
	require.NotEmpty(t, runID)

	r = dair(t, srv, "runs", "get", runID, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var run httpapi.Run
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	require.Equal(t, messages.RunSucceeded, run.Status)
	require.Equal(t, "acme", run.TenantID)
	require.Len(t, run.Steps, 3)

	r = dair(t, srv, "runs", "list", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, runID)

	r = dair(t, srv, "submit", "doomed", "--tenant", "acme", "--wait")
	require.Equal(t, 1, r.code, "a failed run exits 1; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "step boom failed")

	r = dair(t, srv, "submit", "hello", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "run"), r.stdout)

	r = dair(t, srv, "runs", "get", "run-does-not-exist")
	require.Equal(t, 1, r.code)
	require.True(t, strings.HasPrefix(r.stderr, "dair: not_found"), r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one error line: %q", r.stderr)

	r = dair(t, srv, "submit", "no-such-pipeline", "--tenant", "acme")
	require.Equal(t, 1, r.code, r.stderr)

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("key: bad\nsteps:\n  - id: a\n    uses: no-such-handler\n"), 0o600))
	r = dair(t, srv, "pipelines", "put", bad)
	require.Equal(t, 2, r.code, "HTTP 400 is bad input: %s", r.stderr)
	require.Contains(t, r.stderr, "unknown_handler")

	r = dair(t, srv, "tenants", "put", "globex", "--isolation", "dedicated", "--max-runtime-instances", "2")
	require.Equal(t, 0, r.code, r.stderr)
	r = dair(t, srv, "tenants", "get", "globex", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var ten httpapi.Tenant
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ten))
	require.Equal(t, messages.IsolationDedicated, ten.IsolationMode)
	require.EqualValues(t, 2, ten.MaxRuntimeInstances)
	// A put changes the settings given and keeps the others, suspension included.
	r = dair(t, srv, "tenants", "suspend", "globex")
	require.Equal(t, 0, r.code, r.stderr)
	r = dair(t, srv, "tenants", "put", "globex", "--weight", "3", "--max-queued-runs", "7", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	ten = httpapi.Tenant{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ten))
	require.Equal(t, messages.IsolationDedicated, ten.IsolationMode)
	require.EqualValues(t, 2, ten.MaxRuntimeInstances)
	require.EqualValues(t, 3, ten.Weight)
	require.EqualValues(t, 7, ten.MaxQueuedRuns)
	require.True(t, ten.Suspended, "a put without --suspended kept the suspension")
	r = dair(t, srv, "tenants", "put", "globex", "--isolation", "shared", "--suspended=false", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	ten = httpapi.Tenant{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ten))
	require.Equal(t, messages.IsolationShared, ten.IsolationMode)
	require.False(t, ten.Suspended)
	require.EqualValues(t, 3, ten.Weight, "a change of isolation keeps the fair share")
	// Setting the rate to 0 clears the limit whole, its burst too (else the put is refused: a
	// burst needs a rate).
	r = dair(t, srv, "tenants", "put", "globex", "--runs-per-second", "2.5", "--runs-burst", "3", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	r = dair(t, srv, "tenants", "put", "globex", "--runs-per-second", "0", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	ten = httpapi.Tenant{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ten))
	require.Zero(t, ten.RunsPerSecond)
	require.Zero(t, ten.RunsBurst)
	r = dair(t, srv, "tenants", "put", "initech", "--weight", "2", "-o", "json") // new: shared by default
	require.Equal(t, 0, r.code, r.stderr)
	ten = httpapi.Tenant{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ten))
	require.Equal(t, messages.IsolationShared, ten.IsolationMode)
	require.EqualValues(t, 2, ten.Weight)

	for _, args := range [][]string{{"instances", "list"}, {"pipelines", "list"}, {"tenants", "list"},
		{"executions", "ledger", run.ExecutionID}, {"queue", "drain"}, {"pipelines", "get", "hello"}} {
		r = dair(t, append([]string{srv}, args...)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}

	require.Equal(t, 0, n.stop(t), "SIGTERM exits 0; logs:\n%s", n.logs.String())

	n2 := startDev(t, data, pipes)
	r = dair(t, "--server", n2.url, "runs", "get", runID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, messages.RunSucceeded)
	require.Equal(t, 0, n2.stop(t))
}

func TestDair_Usage_exitCodes(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("dev-secret-0123456789\n"), 0o600))
	badPipes := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(badPipes, "x.yaml"), []byte("key: x\nsteps: []\n"), 0o600))
	down := "--server=http://" + testkit.FreeAddr(t)
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string // substring of stderr
		wantOut  string // substring of stdout
	}{
		{"version", []string{"version"}, 0, "", "dair "},
		{"unknown flag", []string{"--bogus"}, 2, "unknown flag", ""},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command", ""},
		{"group without subcommand", []string{"runs"}, 2, "needs a subcommand", ""},
		{"unknown subcommand", []string{"runs", "explode"}, 2, "unknown command", ""},
		{"missing argument", []string{"runs", "get"}, 2, "takes 1 argument", ""},
		{"bad output format", []string{"-o", "xml", "version"}, 2, "unknown output format", ""},
		{"yaml output", []string{"-o", "yaml", "version"}, 0, "", "version: "},
		{"version flag", []string{"--version"}, 0, "", "dair "},
		{"dev help names the host-mode value", []string{"dev", "--help"}, 0, "", "--host-mode string"},
		{"pipelines check bad last", []string{down, "pipelines", "check", "x.yaml", "--last", "0"}, 2, "--last", ""},
		{"server without scheme", []string{"--server", strings.TrimPrefix(down, "--server=http://"), "runs", "get", "x"}, 1,
			`is a node running at http://`, ""},
		{"server bad scheme", []string{"--server", "ftp://h", "runs", "list"}, 2, "--server", ""},
		{"runs list negative limit", []string{down, "runs", "list", "--limit", "-1"}, 2, "--limit", ""},
		{"submit without tenant", []string{down, "submit", "p"}, 2, "--tenant", ""},
		{"submit bad input json", []string{down, "submit", "p", "--tenant", "t", "--input", "{bad"}, 2, "not valid JSON", ""},
		{"submit unreadable input file", []string{down, "submit", "p", "--tenant", "t", "--input", "@/no/such/file"}, 2, "read input file", ""},
		{"pipelines put unreadable", []string{down, "pipelines", "put", "/no/such/file.yaml"}, 2, "read pipeline file", ""},
		{"tenants put bad isolation", []string{down, "tenants", "put", "t", "--isolation", "solo"}, 2, "unknown isolation", ""},
		{"submit key not UTF-8", []string{down, "submit", "p", "--tenant", "t", "--idempotency-key", "order-\xff"}, 2, "not valid UTF-8", ""},
		{"tenants put NaN rate", []string{down, "tenants", "put", "t", "--runs-per-second", "NaN"}, 2, "must be a finite number", ""},
		{"tenants put rate that underflows", []string{down, "tenants", "put", "t", "--runs-per-second", "1e-400"}, 2, "too small for a 64-bit float", ""},
		{"tenants put rate not a number", []string{down, "tenants", "put", "t", "--runs-per-second", "fast"}, 2, `want a number, got "fast"`, ""},
		{"runs get empty id", []string{down, "runs", "get", ""}, 2, "the argument ID is empty", ""},
		{"server down", []string{down, "runs", "get", "x"}, 1, `connection refused; is a node running at`, ""},
		{"server down hint", []string{down, "runs", "get", "x"}, 1, `start one with "dair dev"`, ""},
		{"node join with file store", []string{"node", "--store", "bolt://" + filepath.Join(t.TempDir(), "d.db"),
			"--join", "127.0.0.1:7946", "--http", testkit.FreeAddr(t)}, 2, "a file store cannot be shared", ""},
		{"node without store", []string{"node"}, 2, "--store", ""},
		{"dev non-loopback without auth", []string{"dev", "--data", t.TempDir(), "--http", "0.0.0.0:0"}, 2, "loopback", ""},
		{"dev bad http port", []string{"dev", "--data", t.TempDir(), "--http", "127.0.0.1:99999"}, 2, "bad port", ""},
		{"dev data is a file", []string{"dev", "--data", secret, "--http", "127.0.0.1:0"}, 2, "is a file", ""},
		{"dev bad pipeline dir", []string{"dev", "--data", t.TempDir(), "--http", testkit.FreeAddr(t), "--pipelines", badPipes,
			"--log-level", "error"}, 2, "x.yaml", ""},
		{"dev host mode process", []string{"dev", "--data", t.TempDir(), "--host-mode", "process"}, 2, `needs a cluster ("dair node`, ""},
		{"node host mode kubernetes", []string{"node", "--store", "redis://127.0.0.1:1/0", "--bind", "127.0.0.1:0",
			"--host-mode", "kubernetes"}, 2, "not implemented in this build", ""},
		{"node bad instance settings", []string{"node", "--store", "bolt://" + filepath.Join(t.TempDir(), "d.db"),
			"--instance", "x-1", "--instance-settings", "{bad"}, 2, "--instance-settings", ""},
		{"token missing flags", []string{"token", "--tenant", "t"}, 2, "--secret-file", ""},
		{"token bad role", []string{"token", "--tenant", "t", "--roles", "king", "--secret-file", secret}, 2, "unknown role", ""},
		{"token bad tenant", []string{"token", "--tenant", "x/counter", "--roles", "tenant", "--secret-file", secret}, 2, "invalid tenant_id", ""},
		{"token", []string{"token", "--tenant", "t", "--roles", "tenant,operator", "--secret-file", secret, "--ttl", "1h"}, 0, "", "eyJ"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dair(t, tc.args...)
			require.Equal(t, tc.wantCode, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			if tc.wantErr != "" {
				require.Contains(t, r.stderr, tc.wantErr)
				require.True(t, strings.HasPrefix(r.stderr, "dair: "), r.stderr)
			}
			require.Contains(t, r.stdout, tc.wantOut)
		})
	}
}
