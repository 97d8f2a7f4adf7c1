package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/metrics"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// LifecycleStore is the state the lifecycle service reads and writes.
type LifecycleStore interface {
	store.Registry
	store.Tenants
	store.InstanceRecords
}

// LifecycleConfig configures a Lifecycle. The fields marked required must be set.
type LifecycleConfig struct {
	// Lifecycle holds the seed-001 timings; zero fields mean lifecycle.DefaultConfig's values.
	Lifecycle lifecycle.Config
	// Scopes are the tenant scope actors. Required.
	Scopes Scopes
	// Scaler requests capacity for cold starts. Required.
	Scaler *Scaler
	// Control stops instances. Required.
	Control ControlRouter
	// Metrics, Log and Now default to none, no logging and time.Now.
	Metrics *metrics.Metrics
	Log     *zap.Logger
	Now     func() time.Time
}

// Validate reports a missing required field or invalid timings.
func (c LifecycleConfig) Validate() error {
	if c.Scopes == nil || c.Scaler == nil || c.Control == nil {
		return errors.New("controlplane: lifecycle config: Scopes, Scaler and Control are required")
	}
	if err := c.Lifecycle.Validate(); err != nil {
		return fmt.Errorf("controlplane: lifecycle config: %w", err)
	}
	return nil
}

// Lifecycle is the per-tenant runtime lifecycle of seed 001 around the pure decisions of
// internal/lifecycle: Submit's admission hook (EnsureReady, last seen, cold start), the idle
// and weekly sweeps, suspension and live MaxRuntimeInstances. Without scopes on this node (a
// runtime-only node) Admit and Sweep do nothing.
//
// Its methods are goroutine-safe and block on store and provider I/O and, for a cold start,
// on capacity.
type Lifecycle struct {
	st  LifecycleStore
	cfg LifecycleConfig
	lc  lifecycle.Config
}

// NewLifecycle returns the lifecycle service over st.
func NewLifecycle(st LifecycleStore, cfg LifecycleConfig) (*Lifecycle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	cfg.Now = nowFunc(cfg.Now)
	return &Lifecycle{st: st, cfg: cfg, lc: cfg.Lifecycle.WithDefaults()}, nil
}

// Admit is Submit's lifecycle hook for tenant settings t (normalized): it touches the scope
// (last seen), marks a first request ensured and, when the scope is at zero, cold-starts it:
// request capacity, wait up to ColdStartWait for a ready instance, retry ColdStartRetries
// times, then fail with a *NoCapacityError. A suspended tenant gets ErrSuspended. The first
// request's capacity is scheduled by admission (RequestScaleOut parks the run on it), so Admit
// does not wait for it.
func (l *Lifecycle) Admit(ctx context.Context, t *messages.TenantSettings) error {
	if !l.cfg.Scopes.Available() {
		return nil
	}
	key := lifecycle.ScopeKey(t)
	st, err := l.cfg.Scopes.Ask(ctx, key, ScopeEnsureReady, l.cfg.Now())
	if err != nil {
		return err
	}
	if st.ScaledToZeroAt == 0 && st.EnsuredAt != 0 && !t.Suspended {
		return nil // the hot path: a scope that is up needs no registry read
	}
	live, err := l.live(ctx, t)
	if err != nil {
		return err
	}
	switch lifecycle.Admit(lifecycle.Scope{State: st, Suspended: t.Suspended, Live: len(live)}) {
	case lifecycle.Reject:
		return fmt.Errorf("%w: %s", ErrSuspended, t.TenantId)
	case lifecycle.ColdStart:
		return l.coldStart(ctx, t, key)
	default: // Proceed, EnsureReady
		_, err := l.cfg.Scopes.Ask(ctx, key, ScopeUp, l.cfg.Now())
		return err
	}
}

// coldStart asks for capacity in t's scope and waits for a ready instance, attempt by attempt.
func (l *Lifecycle) coldStart(ctx context.Context, t *messages.TenantSettings, key string) error {
	attempts := l.lc.ColdStartAttempts()
	for try := 1; try <= attempts; try++ {
		l.cfg.Metrics.Admission("cold_start", fmt.Sprintf("attempt-%d", try))
		if _, err := l.cfg.Scaler.Request(ctx, t, "", "cold-start-"+t.TenantId); err != nil {
			return fmt.Errorf("cold start: %w", err)
		}
		live, err := l.waitLive(ctx, t, l.lc.ColdStartWait)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			if err := l.recordLive(ctx, key, live); err != nil {
				return err
			}
			_, err := l.cfg.Scopes.Ask(ctx, key, ScopeUp, l.cfg.Now())
			return err
		}
		l.cfg.Log.Warn("cold start: no capacity in time", zap.String("tenant_id", t.TenantId), zap.Int("attempt", try),
			zap.Duration("wait", l.lc.ColdStartWait))
	}
	return &NoCapacityError{TenantID: t.TenantId, Wait: l.lc.ColdStartWait, Attempts: attempts}
}

// waitLive polls the registry until t's scope has a ready instance or wait elapses.
func (l *Lifecycle) waitLive(ctx context.Context, t *messages.TenantSettings, wait time.Duration) ([]*messages.CapacityDescriptor, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		live, err := l.live(ctx, t)
		if err == nil && len(live) > 0 {
			return live, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, nil
		case <-tick.C:
		}
	}
}

// live returns the ready, non-draining instances of t's scope.
func (l *Lifecycle) live(ctx context.Context, t *messages.TenantSettings) ([]*messages.CapacityDescriptor, error) {
	insts, err := l.st.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	var out []*messages.CapacityDescriptor
	for _, d := range inScope(insts, t) {
		if d.Status == messages.InstanceReady && !d.IsDraining {
			out = append(out, d)
		}
	}
	return out, nil
}

// inScope returns the instances of insts in t's scope that are not stopped.
func inScope(insts []*messages.CapacityDescriptor, t *messages.TenantSettings) []*messages.CapacityDescriptor {
	var out []*messages.CapacityDescriptor
	for _, d := range insts {
		if d.Status != messages.InstanceStopped && tenancy.InScope(d, t) {
			out = append(out, d)
		}
	}
	return out
}

// recordLive makes sure every live instance of scope key has a record at one replica.
func (l *Lifecycle) recordLive(ctx context.Context, key string, live []*messages.CapacityDescriptor) error {
	for _, d := range live {
		r, err := l.st.GetInstanceRecord(ctx, d.RuntimeInstanceId)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("load instance record: %w", err)
		}
		if r != nil && r.Replicas == 1 && r.TenantId == key {
			continue
		}
		rec := &messages.InstanceRecord{RuntimeInstanceId: d.RuntimeInstanceId, TenantId: key, TenantGroupId: d.TenantGroupId,
			Prefix: d.RuntimeInstanceIdPrefix, Replicas: 1, Settings: settingsOf(d)}
		if r != nil && r.TenantId == key {
			rec.CreatedAt = r.CreatedAt
		}
		if err := l.st.PutInstanceRecord(ctx, rec); err != nil {
			return fmt.Errorf("record instance: %w", err)
		}
	}
	return nil
}

// settingsOf rebuilds the scope settings an instance was created with from its descriptor.
func settingsOf(d *messages.CapacityDescriptor) *messages.TenantSettings {
	return &messages.TenantSettings{TenantId: d.TenantId, TenantGroupId: d.TenantGroupId, IsolationMode: d.IsolationMode,
		PreferDedicatedCapacity: d.PreferDedicatedCapacity, AllowSharedFallback: d.AllowSharedFallback,
		RuntimeInstanceIdPrefix: d.RuntimeInstanceIdPrefix, MaxRuntimeInstances: d.MaxRuntimeInstances,
		WorkerCountPerInstance: d.WorkerCount, MaxConcurrentRunsPerInstance: d.MaxConcurrentRuns,
		LocalQueueCapacity: d.QueueCapacity, MaxLocalWorkersPerExecution: d.MaxLocalWorkersPerExecution}
}

// stop stops one instance through its provider (control op stop_instance) and removes its
// registry entry.
func (l *Lifecycle) stop(ctx context.Context, d *messages.CapacityDescriptor) error {
	res := l.cfg.Control.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: d.RuntimeInstanceId, Op: messages.OpStopInstance.String()})
	if !res.GetOk() {
		return fmt.Errorf("stop instance %s: %s", d.RuntimeInstanceId, res.GetReason())
	}
	if err := l.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
		return fmt.Errorf("unregister instance %s: %w", d.RuntimeInstanceId, err)
	}
	return nil
}

// stopIdle stops the instances of live that lifecycle.ScaleIn picks for maxInstances and
// returns the ids it stopped. Busy instances are left for a later sweep.
func (l *Lifecycle) stopIdle(ctx context.Context, live []*messages.CapacityDescriptor, maxInstances int) []string {
	var stopped []string
	for _, id := range lifecycle.ScaleIn(live, maxInstances) {
		if err := l.stop(ctx, find(live, id)); err != nil {
			l.cfg.Log.Warn("tenant lifecycle: stop instance", zap.String("runtime_instance_id", id), zap.Error(err))
			continue
		}
		stopped = append(stopped, id)
	}
	return stopped
}
