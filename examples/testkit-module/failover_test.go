package dairtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// dairBin is the dair binary TestMain builds for the cluster's processes.
var dairBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dairtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdir temp:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	dairBin, err = testkit.BuildBinary(ctx, dir)
	cancel()
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

// slowPipeline runs four sleep steps one after the other, long enough to kill a node while
// the run is in flight.
const slowPipeline = `
key: slow
steps:
  - id: s1
    uses: sleep
    with: {duration: 400ms}
  - id: s2
    uses: sleep
    needs: [s1]
    with: {duration: 400ms}
  - id: s3
    uses: sleep
    needs: [s2]
    with: {duration: 400ms}
  - id: s4
    uses: echo
    needs: [s3]
    with: {value: "done {{ .input.name }}"}
`

// Within bounds how long the run may take to finish after the kill, failure detection and
// recovery included.
const within = 2 * time.Minute

// TestFailover_killRunningNode_runFinishes starts two nodes, submits a run, kills the node
// that runs it (SIGKILL) once its first step has committed, and polls the other node until the
// run has succeeded under the same execution id.
func TestFailover_killRunningNode_runFinishes(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: 2, RedisURL: r.URL()})
	pc.WaitTopology(2)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := pc.Node(0).Client()
	if _, err := c.PutPipeline(ctx, "slow", []byte(slowPipeline)); err != nil {
		t.Fatalf("put pipeline: %v", err)
	}
	sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "slow", TenantID: "acme", Input: json.RawMessage(`{"name":"ada"}`)})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}

	// Wait until the run is in flight with its first step committed, and find its node.
	var (
		before *httpapi.Run
		victim *testkit.ProcessNode
	)
	testkit.EventuallyErr(t, time.Minute, func() error {
		run, err := c.GetRun(ctx, sub.SharedRunID)
		if err != nil {
			return err
		}
		if messages.IsTerminalRun(run.Status) {
			return fmt.Errorf("run finished before the kill: %s", run.Status)
		}
		if !stepSucceeded(run, "s1") {
			return fmt.Errorf("run %s: first step not committed yet", run.Status)
		}
		victim, err = nodeOf(ctx, c, pc, run.AssignedRuntimeInstanceID)
		before = run
		return err
	}, "run %s in flight", sub.SharedRunID)

	victim.Kill()
	survivor := pc.Reachable()[0]
	t.Logf("killed %s, which ran %s; polling %s", victim.ID(), before.AssignedRuntimeInstanceID, survivor.ID())

	var done *httpapi.Run
	testkit.EventuallyErr(t, within, func() error {
		run, err := survivor.Client().GetRun(ctx, sub.SharedRunID)
		if err != nil {
			return err
		}
		if !messages.IsTerminalRun(run.Status) {
			return fmt.Errorf("run still %s on %s", run.Status, run.AssignedRuntimeInstanceID)
		}
		done = run
		return nil
	}, "run %s finished after the kill", sub.SharedRunID)

	if done.Status != messages.RunSucceeded {
		t.Fatalf("run %s: status %s (%s), want %s", done.SharedRunID, done.Status, done.FailureReason, messages.RunSucceeded)
	}
	if done.ExecutionID != before.ExecutionID {
		t.Fatalf("execution id %s after the kill, want %s (the same execution resumed)", done.ExecutionID, before.ExecutionID)
	}
	if string(done.Output) != `{"s4":"done ada"}` {
		t.Fatalf("output %s, want {\"s4\":\"done ada\"}", done.Output)
	}
}

// stepSucceeded reports whether the run's step id has succeeded.
func stepSucceeded(run *httpapi.Run, id string) bool {
	for _, s := range run.Steps {
		if s.ID == id {
			return s.Status == messages.StepSucceeded
		}
	}
	return false
}

// nodeOf returns the cluster node that hosts runtime instance id (the instance's host_id is
// its node's id).
func nodeOf(ctx context.Context, c *client.Client, pc *testkit.ProcessCluster, id string) (*testkit.ProcessNode, error) {
	list, err := c.ListInstances(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, in := range list.Instances {
		if in.RuntimeInstanceID != id {
			continue
		}
		if n := pc.NodeByID(in.HostID); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("instance %s is on unknown host %q", id, in.HostID)
	}
	return nil, fmt.Errorf("no instance %q yet", id)
}
