package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/metrics"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// ScalerStore is the state the scaler reads and writes.
type ScalerStore interface {
	store.ScaleOuts
	store.Runs
	store.Queue
	store.Leases
}

// ScalerConfig configures a Scaler. The zero value of each tunable means its default; the
// collaborators marked required must be set.
type ScalerConfig struct {
	// Holder names this control plane in leases (the node's incarnation). Required.
	Holder string
	// ControlPlaneID is the logical control-plane scope written on requests. Default "default".
	ControlPlaneID string
	// Provider is the default scale-out provider (after the request's hint). Default "local".
	Provider string
	// Cooldown keeps a failed request counting as pending, so a failing provider is not asked
	// again by every pump cycle. It doubles with each failure of the scope in the last
	// failureWindow (up to Cooldown << maxBackoffShift), so a scope whose provider keeps
	// failing is asked every few minutes, and its waiting runs' ledgers grow by three entries
	// per attempt, not every two seconds forever. Default 2s.
	Cooldown time.Duration
	// LeaseTTL is how long the owner of a request holds it without renewal; it renews every
	// third of it while it works, so a crashed owner blocks the request at most LeaseTTL.
	// Default 6s.
	LeaseTTL time.Duration
	// Router creates the capacity. Required.
	Router ScaleOutRouter
	// Ledger records requests and their outcome. Required.
	Ledger Ledger
	// Tenants resolves the scope of parked runs. Required.
	Tenants *Tenants
	// Group runs lease renewals. Required.
	Group Group
	// OnCreated is called after a request is stored (wakes the scale-out supervisor). Optional.
	OnCreated func(requestID string)
	// OnRequeued is called after runs went back to the shared queue (wakes the pump). Optional.
	OnRequeued func()
	// Metrics, Log and Now default to none, no logging and time.Now.
	Metrics *metrics.Metrics
	Log     *zap.Logger
	Now     func() time.Time
}

// Validate reports a missing required collaborator.
func (c ScalerConfig) Validate() error {
	if c.Holder == "" || c.Router == nil || c.Ledger == nil || c.Tenants == nil || c.Group == nil {
		return errors.New("controlplane: scaler config: Holder, Router, Ledger, Tenants and Group are required")
	}
	return nil
}

func (c ScalerConfig) withDefaults() ScalerConfig {
	if c.ControlPlaneID == "" {
		c.ControlPlaneID = "default"
	}
	if c.Provider == "" {
		c.Provider = "local"
	}
	defaultDuration(&c.Cooldown, 2*time.Second)
	defaultDuration(&c.LeaseTTL, 6*time.Second)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	c.Now = nowFunc(c.Now)
	return c
}

// Scaler owns durable scale-out requests: it creates them (for a run admission parked, a cold
// start, a replacement), counts the pending ones of a scope, drives one request to a final
// status through the scale-out provider, and requeues the runs waiting for it. It never
// dispatches a run itself. Its methods block on store and provider I/O and are goroutine-safe.
//
// Several control planes may hold the same request: a store lease makes one of them its owner.
type Scaler struct {
	st  ScalerStore
	cfg ScalerConfig
}

// NewScaler returns a scaler over st.
func NewScaler(st ScalerStore, cfg ScalerConfig) (*Scaler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scaler{st: st, cfg: cfg.withDefaults()}, nil
}

// Backoff of failed requests (ScalerConfig.Cooldown).
const (
	failureWindow   = 15 * time.Minute
	maxBackoffShift = 7 // 2s << 7: about 4 minutes
)

// Pending counts the unfinished scale-out requests of t's scope, and the scope's latest failed
// request while it cools down: Cooldown doubled for each other failure of the scope within
// failureWindow.
func (s *Scaler) Pending(ctx context.Context, t *messages.TenantSettings) (int, error) {
	n, _, err := s.PendingOrFailing(ctx, t)
	return n, err
}

// PendingOrFailing is Pending, and whether the count is the scope's cooling failure alone.
func (s *Scaler) PendingOrFailing(ctx context.Context, t *messages.TenantSettings) (n int, failing bool, err error) {
	reqs, err := s.st.ListScaleOuts(ctx, messages.ScaleOutPending, messages.ScaleOutProvisioning, messages.ScaleOutFailed)
	if err != nil {
		return 0, false, fmt.Errorf("list scale-outs: %w", err)
	}
	now := s.cfg.Now()
	window := now.Add(-failureWindow).UnixNano()
	failures, lastFailure := 0, int64(0)
	for _, r := range reqs {
		if !sameScope(r.Settings, t) {
			continue
		}
		if r.Status != messages.ScaleOutFailed {
			n++
			continue
		}
		if r.UpdatedAt >= window {
			failures++
		}
		lastFailure = max(lastFailure, r.UpdatedAt)
	}
	if failures > 0 && lastFailure >= now.Add(-s.cfg.Cooldown<<min(failures-1, maxBackoffShift)).UnixNano() {
		n++
		failing = n == 1
	}
	return n, failing, nil
}

// Request stores a pending request for capacity in t's scope (runID and correlationID may be
// empty) and wakes its processing. The caller owns the returned request.
func (s *Scaler) Request(ctx context.Context, t *messages.TenantSettings, runID, correlationID string) (*messages.ScaleOutRequest, error) {
	now := s.cfg.Now().UnixNano()
	req := &messages.ScaleOutRequest{RequestId: ids.New("scaleout"), Settings: t, SharedRunId: runID,
		ControlPlaneId: s.cfg.ControlPlaneID, ProviderHint: s.cfg.Provider, Status: messages.ScaleOutPending,
		CreatedAt: now, UpdatedAt: now, CorrelationId: correlationID}
	if err := s.st.CreateScaleOut(ctx, req); err != nil {
		return nil, fmt.Errorf("create scale-out request: %w", err)
	}
	if s.cfg.OnCreated != nil {
		s.cfg.OnCreated(req.RequestId)
	}
	return req, nil
}

// ParkRun requests capacity for a queued run that admission could not place and parks the run
// on the request (status scale_out_requested) until the request finishes.
func (s *Scaler) ParkRun(ctx context.Context, run *messages.SharedRun, t *messages.TenantSettings, reason string) error {
	req, err := s.Request(ctx, t, run.SharedRunId, run.CorrelationId)
	if err != nil {
		return err
	}
	if _, err := s.st.UpdateRun(ctx, run.SharedRunId, func(r *messages.SharedRun) error {
		if r.Status == messages.RunQueued {
			r.Status = messages.RunScaleOutRequested
			r.ScaleOutRequestId = req.RequestId
		}
		return nil
	}); err != nil {
		return fmt.Errorf("park run for scale-out: %w", err)
	}
	s.cfg.Ledger.Record(ctx, &messages.LedgerEntry{Kind: messages.KindScaleOutRequested, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		TenantId: run.GetSnapshot().GetTenantId(), Reason: reason,
		Data: jsonOrNil(map[string]any{"request_id": req.RequestId, "prefix": t.RuntimeInstanceIdPrefix, "isolation_mode": t.IsolationMode,
			"max_runtime_instances": t.MaxRuntimeInstances, "provider_hint": req.ProviderHint})})
	return nil
}

// Unfinished lists the ids of the pending and provisioning requests (a control plane that
// died mid scale-out leaves some behind).
func (s *Scaler) Unfinished(ctx context.Context) ([]string, error) {
	reqs, err := s.st.ListScaleOuts(ctx, messages.ScaleOutPending, messages.ScaleOutProvisioning)
	if err != nil {
		return nil, fmt.Errorf("list scale-out requests: %w", err)
	}
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.RequestId)
	}
	return out, nil
}

// Process runs request id to a final status (Pending → Provisioning → Fulfilled/Failed) and
// requeues the waiting runs of its scope either way: on success the pump finds the new
// capacity; on failure admission decides again. When another control plane owns the request
// it returns nil at once.
func (s *Scaler) Process(ctx context.Context, id string) error {
	lease := "scaleout/" + id
	ok, err := s.st.AcquireLease(ctx, lease, s.cfg.Holder, s.cfg.LeaseTTL)
	if err != nil {
		return fmt.Errorf("lease %s: %w", lease, err)
	}
	if !ok {
		return nil
	}
	stopRenew := s.renewLease(lease)
	defer func() {
		stopRenew()
		rctx, cancel := detached(ctx, s.cfg.LeaseTTL)
		defer cancel()
		if err := s.st.ReleaseLease(rctx, lease, s.cfg.Holder); err != nil {
			s.cfg.Log.Warn("release lease", zap.String("lease", lease), zap.Error(err))
		}
	}()
	req, err := s.st.GetScaleOut(ctx, id)
	if err != nil {
		return fmt.Errorf("load scale-out %s: %w", id, err)
	}
	if req.Status == messages.ScaleOutFulfilled || req.Status == messages.ScaleOutFailed {
		_, err := s.RequeueScope(ctx, req.Settings, id, messages.KindScaleOutFulfilled, "scale-out-"+req.Status)
		return err
	}
	kind, reason, err := s.provision(ctx, req)
	if err != nil {
		return err
	}
	_, err = s.RequeueScope(ctx, req.Settings, id, kind, reason)
	return err
}

// provision marks req provisioning, asks the provider and records the outcome on req. It
// returns the ledger kind and reason of the outcome.
func (s *Scaler) provision(ctx context.Context, req *messages.ScaleOutRequest) (kind, reason string, err error) {
	id := req.RequestId
	if _, err := s.st.UpdateScaleOut(ctx, id, func(r *messages.ScaleOutRequest) error {
		r.Status = messages.ScaleOutProvisioning
		r.Attempts++
		r.UpdatedAt = s.cfg.Now().UnixNano()
		return nil
	}); err != nil {
		return "", "", fmt.Errorf("mark scale-out provisioning: %w", err)
	}
	res := s.cfg.Router.ScaleOut(ctx, req, s.cfg.Provider)
	status, kind, reason := messages.ScaleOutFulfilled, messages.KindScaleOutFulfilled, "capacity-ready"
	if res.Result == nil || !res.Result.Ok {
		status, kind, reason = messages.ScaleOutFailed, messages.KindScaleOutFailed, "provider-failed"
		if res.Result != nil {
			reason = res.Result.Reason
		}
	}
	s.cfg.Metrics.Provider(res.Result)
	if _, err := s.st.UpdateScaleOut(ctx, id, func(r *messages.ScaleOutRequest) error {
		r.Status = status
		r.FailureReason = ""
		if status != messages.ScaleOutFulfilled {
			r.FailureReason = reason
		}
		r.RuntimeInstanceIds = append(r.RuntimeInstanceIds, res.InstanceIDs...)
		r.UpdatedAt = s.cfg.Now().UnixNano()
		return nil
	}); err != nil {
		return "", "", fmt.Errorf("finish scale-out %s: %w", id, err)
	}
	s.cfg.Log.Info("scale-out finished", zap.String("request_id", id), zap.String("status", status), zap.String("reason", reason),
		zap.Strings("runtime_instance_ids", res.InstanceIDs), zap.String("tenant_id", req.GetSettings().GetTenantId()))
	return kind, reason, nil
}

// renewLease keeps lease held, renewing it every third of LeaseTTL from a goroutine of the
// group until the returned function is called (which waits for that goroutine to end).
func (s *Scaler) renewLease(lease string) (stop func()) {
	ttl := s.cfg.LeaseTTL
	done, exited := make(chan struct{}), make(chan struct{})
	if !s.cfg.Group.Go(func(ctx context.Context) {
		defer close(exited)
		tk := time.NewTicker(ttl / 3)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			rctx, cancel := context.WithTimeout(ctx, ttl/3)
			ok, err := s.st.AcquireLease(rctx, lease, s.cfg.Holder, ttl)
			cancel()
			if err != nil || !ok {
				s.cfg.Log.Warn("renew lease", zap.String("lease", lease), zap.Bool("held", ok), zap.Error(err))
			}
		}
	}) {
		close(exited) // the group is stopping: the request's own context ends soon too
	}
	return func() {
		close(done)
		<-exited
	}
}

// RequeueScope makes the runs parked for scale-out in t's scope (or on request requestID)
// queued again, records kind with reason on each, and returns how many it requeued.
func (s *Scaler) RequeueScope(ctx context.Context, t *messages.TenantSettings, requestID, kind, reason string) (int, error) {
	n := 0
	err := s.st.ScanRuns(ctx, store.RunFilter{Status: messages.RunScaleOutRequested}, activePage, func(runs []*messages.SharedRun) error {
		for _, r := range runs {
			rt, err := s.cfg.Tenants.Get(ctx, r.GetSnapshot().GetTenantId())
			if err != nil {
				return err
			}
			if !sameScope(rt, t) && r.ScaleOutRequestId != requestID {
				continue
			}
			moved, err := unpark(ctx, s.st, r.SharedRunId)
			if err != nil {
				return err
			}
			if !moved {
				continue
			}
			s.cfg.Ledger.Record(ctx, &messages.LedgerEntry{Kind: kind, SharedRunId: r.SharedRunId, ExecutionId: r.ExecutionId,
				TenantId: r.GetSnapshot().GetTenantId(), Reason: reason, Data: jsonOrNil(map[string]any{"request_id": requestID})})
			n++
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("requeue parked runs: %w", err)
	}
	if n > 0 && s.cfg.OnRequeued != nil {
		s.cfg.OnRequeued()
	}
	return n, err
}

// unparkStore is what unpark writes.
type unparkStore interface {
	UpdateRun(ctx context.Context, id string, fn func(*messages.SharedRun) error) (*messages.SharedRun, error)
	Enqueue(ctx context.Context, runID string) error
}

// unpark moves a run parked for scale-out back to the shared queue and reports whether it did
// (the run may have moved meanwhile).
func unpark(ctx context.Context, st unparkStore, runID string) (bool, error) {
	moved := false
	if _, err := st.UpdateRun(ctx, runID, func(x *messages.SharedRun) error {
		moved = x.Status == messages.RunScaleOutRequested
		if moved {
			x.Status = messages.RunQueued
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("requeue run %s: %w", runID, err)
	}
	if !moved {
		return false, nil
	}
	if err := st.Enqueue(ctx, runID); err != nil {
		return true, fmt.Errorf("enqueue run %s: %w", runID, err)
	}
	return true, nil
}
