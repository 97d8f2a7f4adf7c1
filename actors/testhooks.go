package actors

import (
	"context"
	"time"
)

// Test-only hooks: they are reached from tests through export_test.go and are not part of the
// public API.

// injectExecutionPanic makes the execution actor of a running run panic once (supervision
// tests; export_test.go exports it to the package's tests only). It returns ErrNotRunning when the run has no local execution.
func (n *Node) injectExecutionPanic(ctx context.Context, runID string) error {
	run, err := n.env.st.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	pid, ok := n.env.dir.Lookup(run.AssignedRuntimeInstanceId)
	if !ok {
		return ErrNotRunning
	}
	res, err := n.env.system.Root.RequestFuture(pid, &injectExecPanic{sharedRunID: runID}, 5*time.Second).Result()
	if err != nil {
		return err
	}
	if ok, _ := res.(bool); !ok {
		return ErrNotRunning
	}
	return nil
}

type injectExecPanic struct{ sharedRunID string }
