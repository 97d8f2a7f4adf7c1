package actors

import (
	"context"
	"fmt"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// PutTenant validates and stores tenant settings; new admissions use them at once.
func (n *Node) PutTenant(ctx context.Context, t *messages.TenantSettings) (*messages.TenantSettings, error) {
	nt := tenancy.Normalize(t)
	if err := tenancy.Validate(nt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	nt.UpdatedAt = n.env.now().UnixNano()
	if err := n.plane.tenants.Put(ctx, nt); err != nil {
		return nil, err
	}
	n.plane.lifecycle.SettingsChanged(ctx, nt)
	return nt, nil
}

// GetTenant returns a tenant's effective settings (defaults for an unknown tenant).
func (n *Node) GetTenant(ctx context.Context, id string) (*messages.TenantSettings, error) {
	return n.plane.tenants.Get(ctx, id)
}

// ListTenants returns every stored tenant.
func (n *Node) ListTenants(ctx context.Context) ([]*messages.TenantSettings, error) {
	return n.env.st.ListTenants(ctx)
}

// SetSuspended suspends or resumes a tenant. Suspending stops its dedicated/hybrid instances
// on this node (its capacity is deleted at once) and deletes their instance records; the first
// request after resuming cold-starts the tenant's capacity.
func (n *Node) SetSuspended(ctx context.Context, id string, suspended bool) (*messages.TenantSettings, error) {
	t, err := n.plane.tenants.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	t.Suspended = suspended
	t.UpdatedAt = n.env.now().UnixNano()
	if err := n.plane.tenants.Put(ctx, t); err != nil {
		return nil, err
	}
	if suspended {
		if err := n.plane.lifecycle.Suspend(ctx, t); err != nil {
			return t, err
		}
	}
	return t, nil
}

// SweepReport is the outcome of one idle sweep (Node.SweepTenants).
type SweepReport = controlplane.SweepReport

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
	return n.plane.lifecycle.Sweep(ctx)
}

// WeeklySweep deletes the instance records that have been at 0 replicas for
// Lifecycle.ZeroRetention (7 days) or more, and returns their ids. The tenant supervisor runs
// it every Lifecycle.WeeklySweepInterval. It is goroutine-safe.
func (n *Node) WeeklySweep(ctx context.Context) ([]string, error) {
	return n.plane.lifecycle.WeeklySweep(ctx)
}

// TouchTenant records a routed request of the tenant (last seen) without admitting a run;
// Submit touches on its own. It blocks only on reading the tenant's settings.
func (n *Node) TouchTenant(ctx context.Context, tenantID string) error {
	if !n.plane.scopes.Available() {
		return nil
	}
	t, err := n.plane.tenants.Get(ctx, tenantID)
	if err != nil {
		return err
	}
	n.plane.scopes.touch(lifecycle.ScopeKey(t), n.env.now())
	return nil
}
