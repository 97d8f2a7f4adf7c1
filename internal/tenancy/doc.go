// Package tenancy holds dair's tenant runtime settings model: defaults for unknown tenants, the
// seed tenants, normalization and validation of settings, the Shared/Dedicated/Hybrid visibility
// rules between a tenant and a runtime instance, the runtime scope a tenant's scale-out counts
// against, runtime instance id allocation by prefix, and the effective worker count of one
// execution.
//
// The package is pure: no I/O, no goroutines, no clocks. Every function is safe for concurrent
// use and never mutates its arguments; returned settings are fresh copies owned by the caller.
//
// Identity and policy are kept apart. The tenant id and tenant group id come from the caller's
// messages.ExecutionContextSnapshot; messages.TenantSettings carry policy only. Instance ids,
// endpoints and metadata are never used to decide who may see an instance, except that the
// runtime scope of a tenant (InScope) is matched by RuntimeInstanceIdPrefix as seed 000 requires
// for local scale-out.
//
// # Visibility rules (seed 000)
//
//  1. A Shared runtime instance (isolation "shared" or empty) is visible to Shared tenants.
//  2. A Shared runtime instance is visible to Hybrid and Dedicated tenants only if their
//     settings allow shared fallback.
//  3. A Dedicated runtime instance is visible only if its TenantId equals the tenant id, or its
//     TenantGroupId equals the tenant group id (both non-empty).
//  4. A Hybrid runtime instance follows the same ownership rule; AllowSharedFallback does not
//     make an unowned Hybrid runtime visible.
//
// # Usage
//
//	t := tenancy.Normalize(stored) // stored may be nil for an unknown tenant
//	if err := tenancy.Validate(t); err != nil {
//		return fmt.Errorf("put tenant: %w", err)
//	}
//	visible := tenancy.FilterVisible(descriptors, snap.TenantId, snap.TenantGroupId, t)
//	id, _ := tenancy.NextInstanceID(t.RuntimeInstanceIdPrefix, existingIDs)
package tenancy
