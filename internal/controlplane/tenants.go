package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/internal/ttlcache"
	"github.com/dairuntime/dair/messages"
)

// TenantsConfig configures Tenants.
type TenantsConfig struct {
	// TTL is how long settings stay cached. Default 1s.
	TTL time.Duration
}

// Tenants reads tenant settings for the control plane, cached for TTL: a change made on this
// node (Put) applies at once, one made elsewhere within TTL, without a restart. It is
// goroutine-safe.
type Tenants struct {
	st    store.Tenants
	cache *ttlcache.Cache[*messages.TenantSettings]
}

// NewTenants returns the settings reader over st.
func NewTenants(st store.Tenants, cfg TenantsConfig) *Tenants {
	defaultDuration(&cfg.TTL, time.Second)
	return &Tenants{st: st, cache: ttlcache.New[*messages.TenantSettings](cfg.TTL)}
}

// Get returns the normalized settings of a tenant; an unknown tenant is Shared with the
// runtime-instance prefix (tenancy.Defaults). It blocks on store I/O on a cache miss. The
// caller owns the returned message.
func (t *Tenants) Get(ctx context.Context, tenantID string) (*messages.TenantSettings, error) {
	if s, ok := t.cache.Get(tenantID); ok {
		return proto.Clone(s).(*messages.TenantSettings), nil
	}
	s, err := t.st.GetTenant(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) {
		s, err = tenancy.Defaults(tenantID), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load tenant %s: %w", tenantID, err)
	}
	s = tenancy.Normalize(s)
	t.cache.Put(tenantID, s)
	return proto.Clone(s).(*messages.TenantSettings), nil
}

// Put stores s (already validated) and drops the cached copy. It blocks on store I/O.
func (t *Tenants) Put(ctx context.Context, s *messages.TenantSettings) error {
	if err := t.st.PutTenant(ctx, s); err != nil {
		return err
	}
	t.cache.Drop(s.TenantId)
	return nil
}

// sameScope reports whether two settings name the same tenant runtime scope (tenant id +
// tenant group id + prefix); shared tenants share one scope per prefix.
func sameScope(a, b *messages.TenantSettings) bool {
	if a == nil || b == nil {
		return false
	}
	if a.RuntimeInstanceIdPrefix != b.RuntimeInstanceIdPrefix {
		return false
	}
	if a.IsolationMode == messages.IsolationShared && b.IsolationMode == messages.IsolationShared {
		return true
	}
	return a.TenantId == b.TenantId && a.TenantGroupId == b.TenantGroupId
}
