package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// TestDair_Dev_pausedRunStaysPausedAcrossARestart: a run paused before a kill -9 of its node
// reads paused after the restart (it read running while nothing ran, and waited forever), and
// finishes once resumed, each step succeeding once. Step a lasts long enough (3 s) that the
// pause lands while it runs even on a loaded machine: a pause that arrives once b has started
// cannot stop the run, which then succeeds.
func TestDair_Dev_pausedRunStaysPausedAcrossARestart(t *testing.T) {
	data, pipes := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(pipes, "slow.yaml"), []byte("key: slow\nsteps:\n"+
		"  - {id: a, uses: sleep, with: {duration: 3s}}\n  - {id: b, uses: echo, needs: [a], with: {value: done}}\n"), 0o600))
	ctx := context.Background()
	n := startDev(t, data, pipes)
	c := client.New(n.url, "")
	sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "slow", TenantID: "pz"})
	require.NoError(t, err)
	id := sub.SharedRunID
	status := func() string {
		r, err := c.GetRun(ctx, id)
		if err != nil {
			return "error: " + err.Error()
		}
		return r.Status
	}
	testkit.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool { return status() == messages.RunRunning }, "run started")
	_, err = c.ControlRun(ctx, id, "pause")
	require.NoError(t, err)
	testkit.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool { return status() == messages.RunPaused }, "run paused")
	n.kill(t)

	n = startDev(t, data, pipes)
	c = client.New(n.url, "")
	// The restart recovers the run (it is marked running) and its execution loads paused.
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		l, err := c.Ledger(ctx, id)
		if err != nil {
			return false
		}
		paused := 0
		for _, e := range l.Entries {
			if e.Kind == messages.KindRunPaused {
				paused++
			}
		}
		return paused == 2
	}, "the reloaded execution recorded its pause")
	require.Equal(t, messages.RunPaused, status(), "after the restart")
	_, err = c.ControlRun(ctx, id, "resume")
	require.NoError(t, err)
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool { return status() == messages.RunSucceeded }, "run finished once resumed")
	l, err := c.Ledger(ctx, id)
	require.NoError(t, err)
	succeeded := map[string]int{}
	for _, e := range l.Entries {
		if e.Kind == messages.KindStepSucceeded {
			succeeded[e.StepID]++
		}
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1}, succeeded)
	require.Equal(t, 0, n.stop(t))
}
