package actors

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

// SweepTenants runs one idle sweep now (the tenant supervisor runs it every
// Lifecycle.IdleSweepInterval): every scope idle for Lifecycle.IdleTimeout is scaled to zero
// (its idle instances are stopped and their records kept at 0 replicas), and every dedicated
// or hybrid scope above its MaxRuntimeInstances stops idle instances down to the maximum.
// Busy instances are left for a later sweep.
//
// Shared capacity belongs to no single tenant: its scope ("shared:<prefix>") is touched by
// every shared tenant's requests, so it scales to zero only when no shared tenant was seen for
// IdleTimeout. SweepTenants blocks on store and provider calls; it is goroutine-safe and a
// no-op on a node without the control-plane role.
func (n *Node) SweepTenants(ctx context.Context) (SweepReport, error) {
	if n.lifecycle.supervisor() == nil {
		return SweepReport{}, nil
	}
	return n.lifecycle.sweep(ctx)
}

// WeeklySweep deletes the instance records that have been at 0 replicas for
// Lifecycle.ZeroRetention (7 days) or more, and returns their ids. The tenant supervisor runs
// it every Lifecycle.WeeklySweepInterval. It is goroutine-safe.
func (n *Node) WeeklySweep(ctx context.Context) ([]string, error) {
	return n.lifecycle.weeklySweep(ctx)
}

// TouchTenant records a routed request of the tenant (last seen) without admitting a run;
// Submit touches on its own. It does not block on I/O.
func (n *Node) TouchTenant(ctx context.Context, tenantID string) error {
	sup := n.lifecycle.supervisor()
	if sup == nil {
		return nil
	}
	t, err := n.core.tenantSettings(ctx, tenantID)
	if err != nil {
		return err
	}
	n.env.system.Root.Send(sup, &scopeEnvelope{key: lifecycle.ScopeKey(t), msg: &touchScope{at: n.env.now()}})
	return nil
}

// scopeSettings lists the scopes a sweep looks at: each stored dedicated or hybrid tenant that
// is not suspended, and one shared scope per prefix of live shared instances.
func (lc *tenantLifecycle) scopeSettings(ctx context.Context, insts []*messages.CapacityDescriptor) (map[string]*messages.TenantSettings, error) {
	tenants, err := lc.n.env.st.ListTenants(ctx)
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

func (lc *tenantLifecycle) sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	e := lc.n.env
	insts, err := e.st.ListInstances(ctx)
	if err != nil {
		return rep, fmt.Errorf("list instances: %w", err)
	}
	scopes, err := lc.scopeSettings(ctx, insts)
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
		t := scopes[key]
		live := inScope(insts, t)
		if len(live) == 0 {
			continue
		}
		if err := lc.recordLive(ctx, key, live); err != nil {
			errs = append(errs, err)
			continue
		}
		st, err := lc.state(key, &scopeState{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		now := e.now()
		if lifecycle.ShouldScaleToZero(now, st, lc.cfg) {
			stopped := lc.stopIdle(ctx, live, 0)
			rep.Stopped = append(rep.Stopped, stopped...)
			if err := lc.markZero(ctx, stopped, now.UnixNano()); err != nil {
				errs = append(errs, err)
			}
			if len(stopped) == len(live) {
				if _, err := lc.ask(key, &scopeDown{at: now}); err != nil {
					errs = append(errs, err)
				}
				rep.ScaledToZero = append(rep.ScaledToZero, key)
				e.log.Info("tenant scope scaled to zero", zap.String("scope", key), zap.Strings("stopped", stopped))
			}
			continue
		}
		if t.IsolationMode != messages.IsolationShared {
			stopped, err := lc.scaleIn(ctx, t, live)
			rep.Stopped = append(rep.Stopped, stopped...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return rep, errors.Join(errs...)
}

// markZero sets the records of ids to 0 replicas since at.
func (lc *tenantLifecycle) markZero(ctx context.Context, ids []string, at int64) error {
	st := lc.n.env.st
	for _, id := range ids {
		r, err := st.GetInstanceRecord(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("load instance record: %w", err)
		}
		r.Replicas, r.ZeroSince = 0, at
		if err := st.PutInstanceRecord(ctx, r); err != nil {
			return fmt.Errorf("mark instance record at zero: %w", err)
		}
	}
	return nil
}

// scaleIn stops idle instances of t's scope above t.MaxRuntimeInstances and deletes their
// records (the capacity is gone for good, not parked at zero).
func (lc *tenantLifecycle) scaleIn(ctx context.Context, t *messages.TenantSettings, live []*messages.CapacityDescriptor) ([]string, error) {
	stopped := lc.stopIdle(ctx, live, int(t.MaxRuntimeInstances))
	for _, id := range stopped {
		if err := lc.n.env.st.DeleteInstanceRecord(ctx, id); err != nil {
			return stopped, fmt.Errorf("delete instance record: %w", err)
		}
	}
	if len(stopped) > 0 {
		lc.n.env.log.Info("tenant scope scaled in", zap.String("tenant_id", t.TenantId), zap.Int32("max_runtime_instances", t.MaxRuntimeInstances),
			zap.Strings("stopped", stopped))
	}
	return stopped, nil
}

func (lc *tenantLifecycle) weeklySweep(ctx context.Context) ([]string, error) {
	st := lc.n.env.st
	recs, err := st.ListInstanceRecords(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list instance records: %w", err)
	}
	expired := lifecycle.Expired(lc.n.env.now(), recs, lc.cfg)
	for i, id := range expired {
		if err := st.DeleteInstanceRecord(ctx, id); err != nil {
			return expired[:i], fmt.Errorf("delete instance record: %w", err)
		}
	}
	return expired, nil
}

// settingsChanged applies live settings: a dedicated or hybrid scope above a lowered
// MaxRuntimeInstances stops idle instances at once; busy ones wait for the idle sweep.
func (lc *tenantLifecycle) settingsChanged(ctx context.Context, t *messages.TenantSettings) {
	if t.IsolationMode == messages.IsolationShared || t.Suspended {
		return
	}
	insts, err := lc.n.env.st.ListInstances(ctx)
	if err != nil {
		lc.n.env.log.Warn("tenant lifecycle: list instances", zap.Error(err))
		return
	}
	if _, err := lc.scaleIn(ctx, t, inScope(insts, t)); err != nil {
		lc.n.env.log.Warn("tenant lifecycle: scale in", zap.String("tenant_id", t.TenantId), zap.Error(err))
	}
}

// suspended runs after a tenant's capacity was deleted by suspension: its instance records
// are deleted and its scope is marked at zero, so the first request after Resume cold-starts.
// Shared capacity is not the tenant's and stays.
func (lc *tenantLifecycle) suspended(ctx context.Context, t *messages.TenantSettings) error {
	if t.IsolationMode == messages.IsolationShared {
		return nil
	}
	key := lifecycle.ScopeKey(t)
	recs, err := lc.n.env.st.ListInstanceRecords(ctx, key)
	if err != nil {
		return fmt.Errorf("list instance records: %w", err)
	}
	for _, r := range recs {
		if err := lc.n.env.st.DeleteInstanceRecord(ctx, r.RuntimeInstanceId); err != nil {
			return fmt.Errorf("delete instance record: %w", err)
		}
	}
	if lc.supervisor() == nil {
		return nil
	}
	_, err = lc.ask(key, &scopeDown{at: lc.n.env.now()})
	return err
}
