package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/dairuntime/dair/messages"
)

// ControlRun sends messages.OpCancelRun, OpPauseRun or OpResumeRun to the run's instance
// through the provider router. A run not yet dispatched can only be cancelled (it is marked at
// once). Another op is an error wrapping messages.ErrUnknownControlOp.
func (n *Node) ControlRun(ctx context.Context, id string, op messages.ControlOp) (*messages.SharedRun, error) {
	if !op.IsRunOp() {
		return nil, fmt.Errorf("actors: control run %s: %w %q", id, messages.ErrUnknownControlOp, op)
	}
	e := n.env
	run, err := e.st.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if messages.IsTerminalRun(run.Status) {
		return run, fmt.Errorf("%w: run is %s", ErrNotRunning, run.Status)
	}
	if run.Status == messages.RunQueued || run.Status == messages.RunScaleOutRequested {
		if op != messages.OpCancelRun {
			return run, fmt.Errorf("%w: run is %s", ErrNotRunning, run.Status)
		}
		entry := &messages.LedgerEntry{Kind: messages.KindRunCancelled, SharedRunId: id, TenantId: run.TenantId, Reason: "cancelled-before-dispatch"}
		upd, changed, err := e.finishRun(ctx, id, entry, func(r *messages.SharedRun) bool {
			if r.Status != messages.RunQueued && r.Status != messages.RunScaleOutRequested {
				return false
			}
			r.Status, r.FailureReason = messages.RunCancelled, "cancelled"
			return true
		})
		if err != nil {
			return nil, err
		}
		if changed {
			return upd, nil
		}
		run = upd
	}
	d, err := e.st.GetInstance(ctx, run.AssignedRuntimeInstanceId)
	if err != nil {
		return run, fmt.Errorf("%w: instance %s: %v", ErrNotRunning, run.AssignedRuntimeInstanceId, err)
	}
	res := n.providers.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: d.RuntimeInstanceId, Op: op.String(),
		LocalRunId: run.LocalRunId, SharedRunId: run.SharedRunId})
	if !res.GetOk() {
		return run, fmt.Errorf("%w: %s", ErrNotRunning, res.GetReason())
	}
	return n.waitStatus(ctx, id, op)
}

// controlWait bounds how long ControlRun waits for an op to show in the run's status.
const controlWait = 5 * time.Second

// waitStatus waits briefly for a control op to show in the run's status.
func (n *Node) waitStatus(ctx context.Context, id string, op messages.ControlOp) (*messages.SharedRun, error) {
	want := map[messages.ControlOp]func(string) bool{
		messages.OpCancelRun: func(s string) bool { return messages.IsTerminalRun(s) },
		messages.OpPauseRun:  func(s string) bool { return s == messages.RunPaused || messages.IsTerminalRun(s) },
		messages.OpResumeRun: func(s string) bool { return s != messages.RunPaused },
	}[op]
	deadline := time.Now().Add(controlWait)
	for {
		run, err := n.env.st.GetRun(ctx, id)
		if err != nil || want == nil || want(run.Status) || time.Now().After(deadline) {
			return run, err
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return run, ctx.Err()
		case <-t.C:
		}
	}
}

// ListInstances returns the live registry.
func (n *Node) ListInstances(ctx context.Context) ([]*messages.CapacityDescriptor, error) {
	return n.env.st.ListInstances(ctx)
}

// ControlInstance sends a queue control (messages.OpPauseQueue, OpResumeQueue, OpDrainQueue,
// OpUndrainQueue) or OpStopInstance to an instance through its provider and returns the
// descriptor after the change.
func (n *Node) ControlInstance(ctx context.Context, id string, op messages.ControlOp) (*messages.CapacityDescriptor, error) {
	d, err := n.env.st.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	res := n.providers.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: id, Op: op.String()})
	if !res.GetOk() {
		return nil, fmt.Errorf("%w: %s", ErrNotRunning, res.GetReason())
	}
	if qs := n.providers.QueueStatus(ctx, d); qs.GetCapacity() != nil {
		return qs.Capacity, nil
	}
	return n.env.st.GetInstance(ctx, id)
}

// DrainQueue runs one manual shared-queue drain cycle and returns how many items it claimed.
func (n *Node) DrainQueue(ctx context.Context) (int, error) {
	claimed, _, err := n.plane.dispatcher.Cycle(ctx, "manual-"+n.env.nodeID)
	return claimed, err
}
