package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// SweepReport is the outcome of one idle sweep.
type SweepReport struct {
	// ScaledToZero lists the scopes (lifecycle.ScopeKey) scaled to zero by this sweep.
	ScaledToZero []string
	// Stopped lists the runtime instances stopped (scale to zero or scale in).
	Stopped []string
}

// Sweep runs one idle sweep: every scope idle for IdleTimeout is scaled to zero (its idle
// instances are stopped and their records kept at 0 replicas), and every dedicated or hybrid
// scope above its MaxRuntimeInstances stops idle instances down to the maximum. Busy instances
// are left for a later sweep. It is a no-op without scopes on this node.
//
// Shared capacity belongs to no single tenant: its scope ("shared:<prefix>") is touched by
// every shared tenant's requests, so it scales to zero only when no shared tenant was seen for
// IdleTimeout.
func (l *Lifecycle) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	if !l.cfg.Scopes.Available() {
		return rep, nil
	}
	insts, err := l.st.ListInstances(ctx)
	if err != nil {
		return rep, fmt.Errorf("list instances: %w", err)
	}
	scopes, err := l.scopeSettings(ctx, insts)
	if err != nil {
		return rep, err
	}
	keys := make([]string, 0, len(scopes))
	for k := range scopes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, key := range keys {
		if err := l.sweepScope(ctx, key, scopes[key], insts, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// sweepScope scales scope key to zero when it is idle, else scales it in to its maximum.
func (l *Lifecycle) sweepScope(ctx context.Context, key string, t *messages.TenantSettings, insts []*messages.CapacityDescriptor, rep *SweepReport) error {
	live := inScope(insts, t)
	if len(live) == 0 {
		return nil
	}
	if err := l.recordLive(ctx, key, live); err != nil {
		return err
	}
	st, err := l.cfg.Scopes.Ask(ctx, key, ScopeRead, l.cfg.Now())
	if err != nil {
		return err
	}
	now := l.cfg.Now()
	if !lifecycle.ShouldScaleToZero(now, st, l.lc) {
		if t.IsolationMode == messages.IsolationShared {
			return nil
		}
		stopped, err := l.scaleIn(ctx, t, live)
		rep.Stopped = append(rep.Stopped, stopped...)
		return err
	}
	stopped := l.stopIdle(ctx, live, 0)
	rep.Stopped = append(rep.Stopped, stopped...)
	var errs []error
	if err := l.markZero(ctx, stopped, now.UnixNano()); err != nil {
		errs = append(errs, err)
	}
	if len(stopped) == len(live) {
		if _, err := l.cfg.Scopes.Ask(ctx, key, ScopeDown, now); err != nil {
			errs = append(errs, err)
		}
		rep.ScaledToZero = append(rep.ScaledToZero, key)
		l.cfg.Log.Info("tenant scope scaled to zero", zap.String("scope", key), zap.Strings("stopped", stopped))
	}
	return errors.Join(errs...)
}

// scopeSettings lists the scopes a sweep looks at: each stored dedicated or hybrid tenant that
// is not suspended, and one shared scope per prefix of live shared instances.
func (l *Lifecycle) scopeSettings(ctx context.Context, insts []*messages.CapacityDescriptor) (map[string]*messages.TenantSettings, error) {
	tenants, err := l.st.ListTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	scopes := map[string]*messages.TenantSettings{}
	for _, t := range tenants {
		t = tenancy.Normalize(t)
		if !t.Suspended && t.IsolationMode != messages.IsolationShared {
			scopes[lifecycle.ScopeKey(t)] = t
		}
	}
	for _, d := range insts {
		if !tenancy.IsSharedInstance(d) || d.RuntimeInstanceIdPrefix == "" {
			continue
		}
		t := tenancy.Normalize(&messages.TenantSettings{IsolationMode: messages.IsolationShared, RuntimeInstanceIdPrefix: d.RuntimeInstanceIdPrefix})
		scopes[lifecycle.ScopeKey(t)] = t
	}
	return scopes, nil
}

// markZero sets the records of ids to 0 replicas since at.
func (l *Lifecycle) markZero(ctx context.Context, ids []string, at int64) error {
	for _, id := range ids {
		r, err := l.st.GetInstanceRecord(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("load instance record: %w", err)
		}
		r.Replicas, r.ZeroSince = 0, at
		if err := l.st.PutInstanceRecord(ctx, r); err != nil {
			return fmt.Errorf("mark instance record at zero: %w", err)
		}
	}
	return nil
}

// scaleIn stops idle instances of t's scope above t.MaxRuntimeInstances and deletes their
// records (the capacity is gone for good, not parked at zero).
func (l *Lifecycle) scaleIn(ctx context.Context, t *messages.TenantSettings, live []*messages.CapacityDescriptor) ([]string, error) {
	stopped := l.stopIdle(ctx, live, int(t.MaxRuntimeInstances))
	for _, id := range stopped {
		if err := l.st.DeleteInstanceRecord(ctx, id); err != nil {
			return stopped, fmt.Errorf("delete instance record: %w", err)
		}
	}
	if len(stopped) > 0 {
		l.cfg.Log.Info("tenant scope scaled in", zap.String("tenant_id", t.TenantId), zap.Int32("max_runtime_instances", t.MaxRuntimeInstances),
			zap.Strings("stopped", stopped))
	}
	return stopped, nil
}

// WeeklySweep deletes the instance records that have been at 0 replicas for ZeroRetention (7
// days) or more, and returns their ids.
func (l *Lifecycle) WeeklySweep(ctx context.Context) ([]string, error) {
	recs, err := l.st.ListInstanceRecords(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list instance records: %w", err)
	}
	expired := lifecycle.Expired(l.cfg.Now(), recs, l.lc)
	for i, id := range expired {
		if err := l.st.DeleteInstanceRecord(ctx, id); err != nil {
			return expired[:i], fmt.Errorf("delete instance record: %w", err)
		}
	}
	return expired, nil
}

// SettingsChanged applies live settings: a dedicated or hybrid scope above a lowered
// MaxRuntimeInstances stops idle instances at once; busy ones wait for the idle sweep.
// Failures are logged.
func (l *Lifecycle) SettingsChanged(ctx context.Context, t *messages.TenantSettings) {
	if t.IsolationMode == messages.IsolationShared || t.Suspended {
		return
	}
	insts, err := l.st.ListInstances(ctx)
	if err != nil {
		l.cfg.Log.Warn("tenant lifecycle: list instances", zap.Error(err))
		return
	}
	if _, err := l.scaleIn(ctx, t, inScope(insts, t)); err != nil {
		l.cfg.Log.Warn("tenant lifecycle: scale in", zap.String("tenant_id", t.TenantId), zap.Error(err))
	}
}

// Suspend removes the capacity of a tenant just suspended (t): its dedicated or hybrid
// instances are stopped and unregistered, their records deleted, and its scope marked at zero,
// so the first request after the tenant resumes cold-starts. Shared capacity is not the
// tenant's and stays.
func (l *Lifecycle) Suspend(ctx context.Context, t *messages.TenantSettings) error {
	if t.IsolationMode == messages.IsolationShared {
		return nil
	}
	insts, err := l.st.ListInstances(ctx)
	if err != nil {
		return err
	}
	for _, d := range insts {
		if tenancy.InScope(d, t) {
			l.cfg.Control.Control(ctx, d, &messages.ControlRequest{RuntimeInstanceId: d.RuntimeInstanceId, Op: messages.OpStopInstance.String()})
			if err := l.st.DeleteInstance(ctx, d.RuntimeInstanceId); err != nil {
				return err
			}
		}
	}
	key := lifecycle.ScopeKey(t)
	recs, err := l.st.ListInstanceRecords(ctx, key)
	if err != nil {
		return fmt.Errorf("list instance records: %w", err)
	}
	for _, r := range recs {
		if err := l.st.DeleteInstanceRecord(ctx, r.RuntimeInstanceId); err != nil {
			return fmt.Errorf("delete instance record: %w", err)
		}
	}
	if !l.cfg.Scopes.Available() {
		return nil
	}
	_, err = l.cfg.Scopes.Ask(ctx, key, ScopeDown, l.cfg.Now())
	return err
}
