package actors

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/jsonvalid"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
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

// Submit creates a shared run (pinned to the pipeline's current hash) and queues or dispatches
// it. A repeated IdempotencyKey of the same tenant returns the first run.
//
// The steps, in order: validate the request and resolve the pipeline; read the tenant's
// settings; admit through the tenant scope (last seen, cold start, suspension); refuse beyond
// the tenant's max_queued_runs (one such submit of a tenant at a time on this node, so
// concurrent ones cannot overshoot it); then, on a node whose instance view shows room
// (Dispatcher.HandOff: no quota on the tenant, nobody waiting), create the run already
// assigned, with its ledger entries, in one store call and deliver it (in either mode: a
// direct submit then returns the run as stored, like a direct dispatch); otherwise create the
// run, record it in the ledger, and dispatch it at once (SubmitDirect) or enqueue it and wake
// the pump. No run is acknowledged before it is durably assigned or queued. Errors:
// ErrStopped, ErrBadInput, ErrUnknownPipeline, ErrTenantSuspended, ErrTenantQueueFull,
// ErrNoCapacity, or a store failure. It blocks on store I/O and, for a cold start, on capacity.
func (n *Node) Submit(ctx context.Context, req SubmitRequest) (*messages.SharedRun, error) {
	if n.stopping.Load() {
		return nil, ErrStopped
	}
	cp, err := n.validateSubmit(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.IdempotencyKey != "" { // a retry finds its run whatever the tenant's state or quotas now
		run, err := n.env.st.RunByIdempotencyKey(ctx, req.Snapshot.TenantId, req.IdempotencyKey)
		if err == nil {
			return run, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	t, err := n.plane.tenants.Get(ctx, req.Snapshot.TenantId)
	if err != nil {
		return nil, err
	}
	if t.Suspended {
		return nil, fmt.Errorf("%w: %s", ErrTenantSuspended, t.TenantId)
	}
	if t.GetMaxQueuedRuns() > 0 {
		// Count, create and enqueue one submit at a time per tenant on this node.
		defer n.queueing.lock(t.TenantId)()
	}
	if err := controlplane.QueueRoom(ctx, n.env.st, t); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTenantQueueFull, err)
	}
	if err := n.plane.lifecycle.Admit(ctx, t); err != nil {
		return nil, admitError(err, t.TenantId)
	}
	run := newRun(req, t, cp, n.env.now().UnixNano())
	mode := cmp.Or(req.Mode, n.env.cfg.SubmitMode)
	if !n.env.cfg.DisableHandOff {
		// One store call creates the run already assigned, with its "submitted" entry.
		handed, err := n.plane.dispatcher.HandOff(ctx, run, "direct-"+n.env.nodeID, submittedEntry(run))
		if err != nil {
			n.env.log.Warn("hand off", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
		}
		switch {
		case handed && mode == SubmitDirect:
			return n.GetRun(ctx, run.SharedRunId)
		case handed:
			return run, nil
		}
	}
	existing, created, err := n.env.st.CreateRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	if !created {
		return existing, nil
	}
	return n.place(ctx, run, mode)
}

// place dispatches a stored run or queues it: SubmitDirect admits and dispatches it here,
// queueing it when it stays queued; otherwise it is enqueued and the pump woken. Either way
// the run is durably assigned or queued before Submit returns.
func (n *Node) place(ctx context.Context, run *messages.SharedRun, mode string) (*messages.SharedRun, error) {
	n.env.ledger(ctx, submittedEntry(run))
	if mode == SubmitDirect {
		out, err := n.plane.dispatcher.DispatchCreated(ctx, run, "direct-"+n.env.nodeID)
		if err != nil {
			n.env.log.Warn("direct dispatch", zap.String("tenant_id", run.TenantId), zap.String("shared_run_id", run.SharedRunId), zap.Error(err))
		}
		if out == controlplane.Done {
			return n.GetRun(ctx, run.SharedRunId)
		}
	}
	if err := n.env.st.EnqueueTenant(ctx, run.TenantId, run.SharedRunId); err != nil {
		return nil, fmt.Errorf("enqueue run: %w", err)
	}
	n.plane.pids.wakePump()
	return run, nil
}

// validateSubmit checks the request's shape and returns the pipeline's current version.
func (n *Node) validateSubmit(ctx context.Context, req SubmitRequest) (*compiled, error) {
	if req.Snapshot == nil || req.Snapshot.TenantId == "" {
		return nil, fmt.Errorf("%w: a tenant is required", ErrBadInput)
	}
	if req.Pipeline == "" {
		return nil, fmt.Errorf("%w: pipeline is required", ErrBadInput)
	}
	if err := tenancy.Validate(&messages.TenantSettings{TenantId: req.Snapshot.TenantId, IsolationMode: messages.IsolationShared,
		RuntimeInstanceIdPrefix: tenancy.DefaultPrefix, MaxRuntimeInstances: 1, WorkerCountPerInstance: 1, MaxConcurrentRunsPerInstance: 1, Weight: 1}); err != nil {
		return nil, fmt.Errorf("%w: tenant id: %v", ErrBadInput, err)
	}
	for _, f := range []struct{ name, v string }{{"idempotency_key", req.IdempotencyKey}, {"correlation_id", req.CorrelationID},
		{"session_id", req.SessionID}} {
		if err := checkRequestID(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if len(req.Input) > 0 && !jsonvalid.Valid(req.Input) {
		return nil, fmt.Errorf("%w: input is not valid JSON", ErrBadInput)
	}
	cp, err := n.env.pipelines.get(ctx, req.Pipeline, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownPipeline, req.Pipeline)
	}
	return cp, err
}

// MaxRequestIDLen bounds a submission's idempotency key, correlation id and session id.
const MaxRequestIDLen = 256

// checkRequestID checks an optional id a caller gives a submission: at most MaxRequestIDLen
// bytes of UTF-8 without control characters (ErrBadInput otherwise).
func checkRequestID(name, v string) error {
	switch {
	case len(v) > MaxRequestIDLen:
		return fmt.Errorf("%w: %s has %d bytes, at most %d", ErrBadInput, name, len(v), MaxRequestIDLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadInput, name)
	case strings.ContainsFunc(v, unicode.IsControl):
		return fmt.Errorf("%w: %s has a control character", ErrBadInput, name)
	}
	return nil
}

// admitError maps the tenant lifecycle's refusals to the node's errors.
func admitError(err error, tenantID string) error {
	var nc *controlplane.NoCapacityError
	switch {
	case errors.As(err, &nc):
		return fmt.Errorf("%w: tenant %s: no ready capacity within %s (%d attempts)", ErrNoCapacity, nc.TenantID, nc.Wait, nc.Attempts)
	case errors.Is(err, controlplane.ErrSuspended):
		return fmt.Errorf("%w: %s", ErrTenantSuspended, tenantID)
	}
	return err
}

// newRun is the queued run of a submission: pinned to the pipeline's current hash, with a copy
// of the caller's snapshot completed by the tenant's group and the correlation id.
func newRun(req SubmitRequest, t *messages.TenantSettings, cp *compiled, now int64) *messages.SharedRun {
	snap := cloneSnapshot(req.Snapshot)
	if snap.TenantGroupId == "" {
		snap.TenantGroupId = t.TenantGroupId
	}
	if snap.CorrelationId == "" {
		snap.CorrelationId = req.CorrelationID
	}
	return &messages.SharedRun{
		SharedRunId: ids.New("run"), TenantId: snap.TenantId, TenantGroupId: snap.TenantGroupId, Pipeline: cp.p.Key,
		PipelineHash: cp.p.Hash, Status: messages.RunQueued, Input: req.Input, CreatedAt: now, UpdatedAt: now,
		Snapshot: snap, IdempotencyKey: req.IdempotencyKey, CorrelationId: req.CorrelationID, SessionId: req.SessionID,
	}
}

func submittedEntry(run *messages.SharedRun) *messages.LedgerEntry {
	snap := run.Snapshot
	return &messages.LedgerEntry{Kind: messages.KindSubmitted, SharedRunId: run.SharedRunId, TenantId: snap.TenantId,
		Data: jsonOrNil(submittedData{Pipeline: run.Pipeline, PipelineHash: run.PipelineHash, RequestedBy: snap.RequestedBy, Source: snap.Source})}
}

// submittedData is the data of a "submitted" entry. Its fields are in the order of their names,
// as the map it replaces encoded them (a struct encodes faster: a run's path wrote three such
// maps, 6% of its CPU).
type submittedData struct {
	Pipeline     string `json:"pipeline"`
	PipelineHash string `json:"pipeline_hash"`
	RequestedBy  string `json:"requested_by"`
	Source       string `json:"source"`
}

func cloneSnapshot(s *messages.ExecutionContextSnapshot) *messages.ExecutionContextSnapshot {
	c := &messages.ExecutionContextSnapshot{TenantId: s.TenantId, TenantGroupId: s.TenantGroupId, OrgId: s.OrgId, UserId: s.UserId,
		CorrelationId: s.CorrelationId, RequestedBy: s.RequestedBy, Source: s.Source}
	c.Roles = append(c.Roles, s.Roles...)
	return c
}

// jsonOrNil returns v as JSON, or nil when v cannot be encoded (ledger data is best-effort).
func jsonOrNil(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
