package controlplane

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// ReconcilerStore is the state the reconciler reads.
type ReconcilerStore interface {
	store.Leases
	store.Registry
}

// ReconcilerConfig configures a Reconciler. The zero value of each tunable means its default;
// the fields marked required must be set.
type ReconcilerConfig struct {
	// Holder names this control plane in the "health" lease. Required.
	Holder string
	// HeartbeatInterval is the instances' heartbeat and the reconciler's tick; the lease lasts
	// 3 intervals + 1s. Default 1s.
	HeartbeatInterval time.Duration
	// HeartbeatTTL is how long a descriptor stays listed without a heartbeat. Default 5s.
	HeartbeatTTL time.Duration
	// Circuits is the dispatcher's breaker: an open circuit makes an instance unhealthy. Required.
	Circuits *Circuits
	// Tenants resolves the settings of dedicated and hybrid scopes. Required.
	Tenants *Tenants
	// Scaler requests replacement capacity. Required.
	Scaler *Scaler
	// Log and Now default to no logging and time.Now.
	Log *zap.Logger
	Now func() time.Time
}

// Validate reports a missing required field.
func (c ReconcilerConfig) Validate() error {
	if c.Holder == "" || c.Circuits == nil || c.Tenants == nil || c.Scaler == nil {
		return errors.New("controlplane: reconciler config: Holder, Circuits, Tenants and Scaler are required")
	}
	return nil
}

func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	defaultDuration(&c.HeartbeatInterval, time.Second)
	defaultDuration(&c.HeartbeatTTL, 5*time.Second)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	c.Now = nowFunc(c.Now)
	return c
}

// Reconciler watches the registry: instances whose heartbeat went stale or whose circuit
// opened are reported unhealthy (they get no new work: admission skips stale heartbeats and
// open circuits), and one replacement instance is requested for their tenant scope when the
// scope has room. Stale descriptors expire from the registry by their TTL (self-healing); the
// recoverer moves their runs. One control plane acts at a time (store lease "health"). Its
// methods block on store I/O and are goroutine-safe; the caller keeps the flagged set.
type Reconciler struct {
	st  ReconcilerStore
	cfg ReconcilerConfig
}

// NewReconciler returns a reconciler over st.
func NewReconciler(st ReconcilerStore, cfg ReconcilerConfig) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Reconciler{st: st, cfg: cfg.withDefaults()}, nil
}

// Reconcile is one pass. flagged holds the instances reported before (each transition is
// acted on once); Reconcile updates it and returns it.
func (r *Reconciler) Reconcile(ctx context.Context, flagged map[string]bool) map[string]bool {
	ok, err := r.st.AcquireLease(ctx, "health", r.cfg.Holder, 3*r.cfg.HeartbeatInterval+time.Second)
	if err != nil || !ok {
		return flagged
	}
	// The time before the list: every heartbeat listed is at least as recent as the call, and a
	// list slowed by a loaded store must not age the heartbeats it read.
	now := r.cfg.Now()
	insts, err := r.st.ListInstances(ctx)
	if err != nil {
		r.cfg.Log.Warn("health: list instances", zap.Error(err))
		return flagged
	}
	live := map[string]bool{}
	for _, d := range insts {
		live[d.RuntimeInstanceId] = true
		why := r.unhealthy(d, now)
		if why == "" {
			delete(flagged, d.RuntimeInstanceId)
			continue
		}
		if why == ReasonCircuitOpen {
			r.markUnhealthy(ctx, d, why, now)
		}
		if flagged[d.RuntimeInstanceId] {
			continue
		}
		flagged[d.RuntimeInstanceId] = true
		r.cfg.Log.Warn("runtime instance unhealthy; no new work goes to it", zap.String("runtime_instance_id", d.RuntimeInstanceId),
			zap.String("reason", why), zap.String("tenant_id", d.TenantId))
		r.requestReplacement(ctx, d, insts, why)
	}
	for id := range flagged {
		if !live[id] {
			delete(flagged, id) // expired from the registry: TTL self-healing finished the job
		}
	}
	return flagged
}

// unhealthy returns why d gets no work at now ("" when it is healthy).
func (r *Reconciler) unhealthy(d *messages.CapacityDescriptor, now time.Time) string {
	switch {
	case d.LastHeartbeatAt < now.Add(-r.staleAfter()).UnixNano():
		return ReasonStaleHeartbeat
	case r.cfg.Circuits.IsOpen(CircuitKey(d), now):
		return ReasonCircuitOpen
	}
	return ""
}

// Health reasons of the reconciler, also written to a marked descriptor's metadata.
const (
	ReasonStaleHeartbeat = "stale-heartbeat"
	ReasonCircuitOpen    = "circuit-open"
	// MetadataHealthReason is the descriptor metadata key of the reason an instance was marked
	// unhealthy in the registry.
	MetadataHealthReason = "health.reason"
)

// markUnhealthy writes d back to the registry as unhealthy and unable to accept runs, so every
// control plane's admission skips it (the instance's own next heartbeat may publish it ready
// again; the mark is re-asserted on every pass while the circuit stays open). The entry keeps
// the instance's heartbeat time and expires when the instance's own heartbeat would have: the
// mark never keeps a dead instance listed.
func (r *Reconciler) markUnhealthy(ctx context.Context, d *messages.CapacityDescriptor, why string, now time.Time) {
	if d.Status == messages.InstanceUnhealthy && d.GetMetadata()[MetadataHealthReason] == why {
		return
	}
	left := time.Unix(0, d.LastHeartbeatAt).Add(r.cfg.HeartbeatTTL).Sub(now)
	if left <= 0 {
		return
	}
	cp := proto.Clone(d).(*messages.CapacityDescriptor)
	cp.Status, cp.CanAcceptRun = messages.InstanceUnhealthy, false
	if cp.Metadata == nil {
		cp.Metadata = map[string]string{}
	}
	cp.Metadata[MetadataHealthReason] = why
	if err := r.st.PutInstance(ctx, cp, left); err != nil {
		r.cfg.Log.Warn("health: mark instance unhealthy", zap.String("runtime_instance_id", d.RuntimeInstanceId), zap.Error(err))
	}
}

// requestReplacement asks for one more instance in d's scope when the scope's healthy
// instances are fewer than its maximum and no request for the scope is already pending.
func (r *Reconciler) requestReplacement(ctx context.Context, d *messages.CapacityDescriptor, insts []*messages.CapacityDescriptor, why string) {
	var t *messages.TenantSettings
	if d.IsolationMode == messages.IsolationShared || d.IsolationMode == "" {
		t = tenancy.Defaults(d.TenantId)
		t.RuntimeInstanceIdPrefix, t.MaxRuntimeInstances = d.RuntimeInstanceIdPrefix, d.MaxRuntimeInstances
	} else {
		var err error
		if t, err = r.cfg.Tenants.Get(ctx, d.TenantId); err != nil {
			return
		}
	}
	healthy := 0
	now := r.cfg.Now()
	for _, x := range insts {
		if tenancy.InScope(x, t) && r.unhealthy(x, now) == "" {
			healthy++
		}
	}
	pending, err := r.cfg.Scaler.Pending(ctx, t)
	if err != nil || healthy+pending >= int(t.MaxRuntimeInstances) {
		return
	}
	req, err := r.cfg.Scaler.Request(ctx, t, "", "")
	if err != nil {
		r.cfg.Log.Warn("health: request replacement", zap.Error(err))
		return
	}
	r.cfg.Log.Info("replacement capacity requested", zap.String("request_id", req.RequestId), zap.String("replaces", d.RuntimeInstanceId),
		zap.String("reason", why), zap.String("tenant_id", t.TenantId))
}

// staleAfter is how old a heartbeat may be before the instance counts as unhealthy: two missed
// heartbeats, and at least half the registry TTL (scheduling hiccups must not flap instances).
func (r *Reconciler) staleAfter() time.Duration {
	return max(2*r.cfg.HeartbeatInterval, r.cfg.HeartbeatTTL/2)
}
