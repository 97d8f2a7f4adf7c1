package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/testkit"
)

const sleepyYAML = `
key: sleepy
steps:
  - id: nap
    uses: sleep
    with: {duration: 1s}
  - id: done
    uses: echo
    needs: [nap]
    with: {value: ok}
`

// triggerWriter calls fire once when what it received contains want.
type triggerWriter struct {
	mu    sync.Mutex // guards buf and fired
	buf   bytes.Buffer
	want  string
	fire  func()
	fired bool
}

func (w *triggerWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(b)
	if !w.fired && strings.Contains(w.buf.String(), w.want) {
		w.fired = true
		w.fire()
	}
	return n, err
}

func (w *triggerWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestDair_Watch_interruptAndReattach(t *testing.T) {
	n := startInproc(t)
	n.put(t, sleepyYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctrlC, interrupt := context.WithCancel(ctx)
	out := &triggerWriter{want: " submitted\n", fire: interrupt}
	var errb bytes.Buffer
	code := run(ctrlC, []string{"--server", n.url, "submit", "sleepy", "--tenant", "acme", "--wait"}, strings.NewReader(""), out, &errb)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	id := strings.Fields(out.String())[1]
	require.Contains(t, errb.String(), "stopped following run "+id+"; the run goes on")
	require.Contains(t, errb.String(), "Re-attach with: dair --server "+n.url+" runs watch "+id)
	require.NotContains(t, errb.String(), "context canceled")

	r := n.cli(t, "runs", "watch", id)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "[2/2] step done succeeded")
	require.Contains(t, r.stdout, "run "+id+" succeeded: 2/2 steps succeeded")

	r = n.cli(t, "runs", "get", id, "--watch")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "[1/2] step nap succeeded")
	r = n.cli(t, "runs", "watch", "nosuch")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `run "dair runs list"`)
}

func TestDair_Watch_queuedRunSaysWhy(t *testing.T) {
	n := startInproc(t)
	n.put(t, testkit.ThreeStepPipeline)
	c := client.New(n.url, "")
	ctx := context.Background()
	warm := n.cli(t, "submit", "three", "--tenant", "acme", "--input", `{"name":"x"}`, "--wait")
	require.Equal(t, 0, warm.code, warm.stderr)
	insts, err := c.ListInstances(ctx, "")
	require.NoError(t, err)
	require.NotEmpty(t, insts.Instances)
	for _, i := range insts.Instances {
		_, err := c.ControlInstance(ctx, i.RuntimeInstanceID, client.OpPause)
		require.NoError(t, err)
	}
	r := n.cli(t, "submit", "three", "--tenant", "acme", "--input", `{"name":"x"}`)
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)

	done := make(chan result, 1)
	go func() { done <- n.cli(t, "runs", "watch", id) }()
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		l, err := c.Ledger(ctx, id)
		if err != nil {
			return false
		}
		for _, e := range l.Entries {
			if e.Kind == "admission" && e.RuntimeInstanceID == "" {
				return true
			}
		}
		return false
	}, "the run is refused admission while every instance is paused")
	for _, i := range insts.Instances {
		_, err := c.ControlInstance(ctx, i.RuntimeInstanceID, client.OpResume)
		require.NoError(t, err)
	}
	res := <-done
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Regexp(t, `(?m)^queued: \S+`, res.stdout, "the watch says why the run waits")
	require.Contains(t, res.stdout, "[3/3]")
}
