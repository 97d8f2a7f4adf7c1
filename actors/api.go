package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/jsonvalid"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Errors returned by Node's API methods.
var (
	// ErrUnknownPipeline is returned by Submit when no pipeline has the key.
	ErrUnknownPipeline = errors.New("actors: unknown pipeline")
	// ErrTenantSuspended is returned by Submit for a suspended tenant.
	ErrTenantSuspended = errors.New("actors: tenant suspended")
	// ErrBadInput is returned for malformed requests (bad JSON input, missing fields).
	ErrBadInput = errors.New("actors: bad input")
	// ErrNotRunning is returned by run control on a run that has not reached an instance or
	// is already final.
	ErrNotRunning = errors.New("actors: run is not running")
	// ErrNotFound is store.ErrNotFound, re-exported for callers of Node.
	ErrNotFound = store.ErrNotFound
	// ErrNoCapacity is returned by Submit when a tenant scaled to zero got no ready capacity
	// within the cold-start wait, retries included (HTTP 503).
	ErrNoCapacity = errors.New("actors: no capacity")
)

// SubmitRequest is one run submission. Snapshot is the caller's verified tenant context and
// travels unchanged to the execution.
type SubmitRequest struct {
	Pipeline       string
	Input          json.RawMessage
	Snapshot       *messages.ExecutionContextSnapshot
	CorrelationID  string
	IdempotencyKey string
	SessionID      string
	// Mode overrides the node's submit mode ("" = node default).
	Mode string
}

// PutPipeline validates, stores and caches a pipeline definition (YAML or JSON).
func (n *Node) PutPipeline(ctx context.Context, src []byte) (*dag.Pipeline, error) {
	cp, err := n.env.pipelines.put(ctx, src)
	if err != nil {
		return nil, err
	}
	return cp.p, nil
}

// GetPipeline returns the latest version of a pipeline.
func (n *Node) GetPipeline(ctx context.Context, key string) (*dag.Pipeline, error) {
	cp, err := n.env.pipelines.get(ctx, key, "")
	if err != nil {
		return nil, err
	}
	return cp.p, nil
}

// ListPipelines returns the latest version of every pipeline.
func (n *Node) ListPipelines(ctx context.Context) ([]*messages.PipelineVersion, error) {
	return n.env.st.ListPipelines(ctx)
}

// Submit creates a shared run (pinned to the pipeline's current hash) and queues or dispatches
// it. A repeated IdempotencyKey of the same tenant returns the first run.
func (n *Node) Submit(ctx context.Context, req SubmitRequest) (*messages.SharedRun, error) {
	e := n.env
	if req.Snapshot == nil || req.Snapshot.TenantId == "" {
		return nil, fmt.Errorf("%w: a tenant is required", ErrBadInput)
	}
	if req.Pipeline == "" {
		return nil, fmt.Errorf("%w: pipeline is required", ErrBadInput)
	}
	if err := tenancy.Validate(&messages.TenantSettings{TenantId: req.Snapshot.TenantId, IsolationMode: messages.IsolationShared,
		RuntimeInstanceIdPrefix: tenancy.DefaultPrefix, MaxRuntimeInstances: 1, WorkerCountPerInstance: 1, MaxConcurrentRunsPerInstance: 1}); err != nil {
		return nil, fmt.Errorf("%w: tenant id: %v", ErrBadInput, err)
	}
	if len(req.Input) > 0 && !jsonvalid.Valid(req.Input) {
		return nil, fmt.Errorf("%w: input is not valid JSON", ErrBadInput)
	}
	cp, err := e.pipelines.get(ctx, req.Pipeline, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownPipeline, req.Pipeline)
	}
	if err != nil {
		return nil, err
	}
	t, err := n.core.tenantSettings(ctx, req.Snapshot.TenantId)
	if err != nil {
		return nil, err
	}
	if t.Suspended {
		return nil, fmt.Errorf("%w: %s", ErrTenantSuspended, req.Snapshot.TenantId)
	}
	if err := n.lifecycle.admit(ctx, t); err != nil {
		return nil, err
	}
	snap := cloneSnapshot(req.Snapshot)
	if snap.TenantGroupId == "" {
		snap.TenantGroupId = t.TenantGroupId
	}
	if snap.CorrelationId == "" {
		snap.CorrelationId = req.CorrelationID
	}
	now := e.now().UnixNano()
	run := &messages.SharedRun{
		SharedRunId: ids.New("run"), TenantId: snap.TenantId, TenantGroupId: snap.TenantGroupId, Pipeline: cp.p.Key,
		PipelineHash: cp.p.Hash, Status: messages.RunQueued, Input: req.Input, CreatedAt: now, UpdatedAt: now,
		Snapshot: snap, IdempotencyKey: req.IdempotencyKey, CorrelationId: req.CorrelationID, SessionId: req.SessionID,
	}
	existing, created, err := e.st.CreateRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	if !created {
		return existing, nil
	}
	e.ledger(ctx, &messages.LedgerEntry{Kind: messages.KindSubmitted, SharedRunId: run.SharedRunId, TenantId: snap.TenantId,
		Data: mustJSON(map[string]any{"pipeline": cp.p.Key, "pipeline_hash": cp.p.Hash, "source": snap.Source, "requested_by": snap.RequestedBy})})
	mode := req.Mode
	if mode == "" {
		mode = e.cfg.SubmitMode
	}
	if mode == SubmitDirect && n.core != nil {
		out, err := n.core.dispatchRun(ctx, run.SharedRunId, "direct-"+e.nodeID, nil)
		if err != nil {
			e.log.Warn("direct dispatch", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
		}
		if out == outcomeDone {
			return n.GetRun(ctx, run.SharedRunId)
		}
	}
	if err := e.st.Enqueue(ctx, run.SharedRunId); err != nil {
		return nil, fmt.Errorf("enqueue run: %w", err)
	}
	n.core.wakePump()
	return run, nil
}

func cloneSnapshot(s *messages.ExecutionContextSnapshot) *messages.ExecutionContextSnapshot {
	c := &messages.ExecutionContextSnapshot{TenantId: s.TenantId, TenantGroupId: s.TenantGroupId, OrgId: s.OrgId, UserId: s.UserId,
		CorrelationId: s.CorrelationId, RequestedBy: s.RequestedBy, Source: s.Source}
	c.Roles = append(c.Roles, s.Roles...)
	return c
}

// GetRun returns a run.
func (n *Node) GetRun(ctx context.Context, id string) (*messages.SharedRun, error) {
	return n.env.st.GetRun(ctx, id)
}

// ListRuns lists runs.
func (n *Node) ListRuns(ctx context.Context, f store.RunFilter) ([]*messages.SharedRun, error) {
	return n.env.st.ListRuns(ctx, f)
}

// RunSteps returns the committed step states of a run's execution (nil before it starts).
func (n *Node) RunSteps(ctx context.Context, run *messages.SharedRun) ([]*messages.StepState, error) {
	if run.ExecutionId == "" {
		return nil, nil
	}
	_, steps, err := n.env.st.GetExecution(ctx, run.ExecutionId)
	return steps, err
}

// Await blocks until the run is final or ctx ends, and returns it.
func (n *Node) Await(ctx context.Context, id string) (*messages.SharedRun, error) {
	ch, cancel := n.env.hub.SubscribeTerminal(id)
	defer cancel()
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		run, err := n.env.st.GetRun(ctx, id)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil && messages.IsTerminalRun(run.Status) {
			return run, nil
		}
		select {
		case <-ctx.Done():
			if run != nil {
				return run, ctx.Err()
			}
			return nil, ctx.Err()
		case <-ch:
		case <-poll.C:
		}
	}
}

// ControlRun sends cancel_run, pause_run or resume_run to the run's instance through the
// provider router. A run not yet dispatched can only be cancelled (it is marked at once).
func (n *Node) ControlRun(ctx context.Context, id, op string) (*messages.SharedRun, error) {
	e := n.env
	run, err := e.st.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if messages.IsTerminalRun(run.Status) {
		return run, fmt.Errorf("%w: run is %s", ErrNotRunning, run.Status)
	}
	if run.Status == messages.RunQueued || run.Status == messages.RunScaleOutRequested {
		if op != "cancel_run" {
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
	res := n.providers.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: d.RuntimeInstanceId, Op: op,
		LocalRunId: run.LocalRunId, SharedRunId: run.SharedRunId})
	if !res.GetOk() {
		return run, fmt.Errorf("%w: %s", ErrNotRunning, res.GetReason())
	}
	return n.waitStatus(ctx, id, op)
}

// waitStatus waits briefly for a control op to show in the run's status.
func (n *Node) waitStatus(ctx context.Context, id, op string) (*messages.SharedRun, error) {
	want := map[string]func(string) bool{
		"cancel_run": func(s string) bool { return messages.IsTerminalRun(s) },
		"pause_run":  func(s string) bool { return s == messages.RunPaused || messages.IsTerminalRun(s) },
		"resume_run": func(s string) bool { return s != messages.RunPaused },
	}[op]
	deadline := time.Now().Add(2 * time.Second)
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

// ControlInstance sends pause_queue, resume_queue or drain_queue to an instance through its
// provider and returns the descriptor after the change.
func (n *Node) ControlInstance(ctx context.Context, id, op string) (*messages.CapacityDescriptor, error) {
	d, err := n.env.st.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	res := n.providers.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: id, Op: op})
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
	claimed, _, err := n.core.cycle(ctx, "manual-"+n.env.nodeID)
	return claimed, err
}

// PutTenant validates and stores tenant settings; new admissions use them at once.
func (n *Node) PutTenant(ctx context.Context, t *messages.TenantSettings) (*messages.TenantSettings, error) {
	nt := tenancy.Normalize(t)
	if err := tenancy.Validate(nt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	nt.UpdatedAt = n.env.now().UnixNano()
	if err := n.env.st.PutTenant(ctx, nt); err != nil {
		return nil, err
	}
	n.core.tenants.drop(nt.TenantId)
	n.lifecycle.settingsChanged(ctx, nt)
	return nt, nil
}

// GetTenant returns a tenant's effective settings (defaults for an unknown tenant).
func (n *Node) GetTenant(ctx context.Context, id string) (*messages.TenantSettings, error) {
	return n.core.tenantSettings(ctx, id)
}

// ListTenants returns every stored tenant.
func (n *Node) ListTenants(ctx context.Context) ([]*messages.TenantSettings, error) {
	return n.env.st.ListTenants(ctx)
}

// SetSuspended suspends or resumes a tenant. Suspending stops its dedicated/hybrid instances
// on this node (its capacity is deleted at once) and deletes their instance records; the first
// request after resuming cold-starts the tenant's capacity.
func (n *Node) SetSuspended(ctx context.Context, id string, suspended bool) (*messages.TenantSettings, error) {
	t, err := n.core.tenantSettings(ctx, id)
	if err != nil {
		return nil, err
	}
	t.Suspended = suspended
	t.UpdatedAt = n.env.now().UnixNano()
	if err := n.env.st.PutTenant(ctx, t); err != nil {
		return nil, err
	}
	n.core.tenants.drop(id)
	if suspended && t.IsolationMode != messages.IsolationShared {
		insts, err := n.env.st.ListInstances(ctx)
		if err != nil {
			return t, err
		}
		for _, d := range insts {
			if tenancy.InScope(d, t) {
				n.providers.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: d.RuntimeInstanceId, Op: "stop_instance"})
				if err := n.env.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
					return t, err
				}
			}
		}
	}
	if suspended {
		if err := n.lifecycle.suspended(ctx, t); err != nil {
			return t, err
		}
	}
	return t, nil
}

// Ledger returns the ledger of an execution's shared run (the id may also be a shared run id).
func (n *Node) Ledger(ctx context.Context, id string, afterSeq int64) (string, []*messages.LedgerEntry, error) {
	runID, err := n.runIDFor(ctx, id)
	if err != nil {
		return "", nil, err
	}
	entries, err := n.env.st.ReadLedger(ctx, runID, afterSeq, 0)
	return runID, entries, err
}

// runIDFor maps an execution id (or a shared run id) to its shared run id.
func (n *Node) runIDFor(ctx context.Context, id string) (string, error) {
	ex, _, err := n.env.st.GetExecution(ctx, id)
	if err == nil {
		return ex.SharedRunId, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	run, err := n.env.st.GetRun(ctx, id)
	if err != nil {
		return "", err
	}
	return run.SharedRunId, nil
}

// InjectExecutionPanic makes the execution actor of a running run panic once (supervision
// tests and demos). It returns ErrNotRunning when the run has no local execution.
func (n *Node) InjectExecutionPanic(ctx context.Context, runID string) error {
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

// Trace returns the timeline of an execution's run (the id may also be a shared run id).
func (n *Node) Trace(ctx context.Context, id string) (string, []history.Span, error) {
	runID, entries, err := n.Ledger(ctx, id, 0)
	if err != nil {
		return "", nil, err
	}
	return runID, history.Trace(entries), nil
}

// Replay re-runs a finished execution from its recorded step outputs without calling handlers
// and reports any divergence.
func (n *Node) Replay(ctx context.Context, executionID string) (history.Report, error) {
	ex, steps, err := n.env.st.GetExecution(ctx, executionID)
	if err != nil {
		return history.Report{}, err
	}
	cp, err := n.env.pipelines.get(ctx, ex.PipelineKey, ex.PipelineHash)
	if err != nil {
		return history.Report{}, err
	}
	entries, err := n.env.st.ReadLedger(ctx, ex.SharedRunId, 0, 0)
	if err != nil {
		return history.Report{}, err
	}
	return history.Replay(history.ReplayInput{Pipeline: cp.p, Graph: cp.g, Execution: ex, Steps: steps, Ledger: entries}), nil
}
