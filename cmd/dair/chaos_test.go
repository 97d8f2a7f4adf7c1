package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/chaos"
	"github.com/dairuntime/dair/testkit"
)

// chaosTimeout bounds the short chaos profile, which takes about 40 s on an idle 2-core
// machine; the bound is for a loaded one.
const chaosTimeout = 6 * time.Minute

// TestChaos_shortProfile runs `dair chaos` with every fault kind (3 nodes, 30 runs, 25 s) as
// a subprocess and requires every property of its JSON report to hold (usage_equals_ledger
// included: usage is written by the fenced commits) and exit status 0.
func TestChaos_shortProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos run")
	}
	testkit.RequireRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, dairBin, "chaos", "--nodes", "3", "--runs", "30",
		"--faults", "kill,pause,redis-restart,partition", "--duration", "25s", "--seed", "1", "--finish-timeout", "90s", "-o", "json")
	cmd.Env = append(os.Environ(), "DAIR_SERVER=", "DAIR_TOKEN=")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) } // let it kill its nodes
	cmd.WaitDelay = 30 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err := cmd.Run()
	t.Logf("dair chaos took %s; progress:\n%s", time.Since(began).Round(time.Second), errb.String())
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run dair chaos: %v", err)
	}
	code := cmd.ProcessState.ExitCode()
	require.Contains(t, []int{0, 1}, code, "stdout:\n%s", out.String())
	var rep chaos.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "stdout:\n%s", out.String())
	require.Equal(t, int64(1), rep.Seed)
	require.Len(t, rep.FaultLog, 4, "the 25 s schedule has one fault of each kind")
	failed := 0
	for _, p := range rep.Properties {
		if !p.Held {
			failed++
			t.Errorf("property %s failed: %s\n  %s", p.Name, p.Summary, strings.Join(p.Violations, "\n  "))
		}
	}
	require.Equal(t, rep.Passed, code == 0, "exit status %d with passed=%v", code, rep.Passed)
	if failed > 0 {
		t.Fatalf("%d properties failed (log directory %s)", failed, rep.LogDir)
	}
	require.Equal(t, 0, code)
	require.Equal(t, rep.Workload.Acknowledged, rep.Workload.Succeeded)
}

func TestChaos_badUsage(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown fault", []string{"--faults", "meteor"}, "unknown fault"},
		{"too short for the faults", []string{"--duration", "5s"}, "too short"},
		{"file store", []string{"--store", "bolt:///tmp/x.db", "--faults", "kill"}, "not redis://"},
		{"redis-restart on an external store", []string{"--store", "redis://127.0.0.1:1/0", "--faults", "redis-restart"},
			"redis-restart needs the private redis-server"},
		{"too many nodes", []string{"--nodes", "10"}, "--nodes 10"},
		{"arguments", []string{"extra"}, "takes 0 argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dair(t, append([]string{"chaos"}, tc.args...)...)
			require.Equal(t, 2, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.wantErr)
		})
	}
}
