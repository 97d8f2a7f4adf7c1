package tenancy

import (
	"github.com/dairuntime/dair/messages"
)

// IsSharedInstance reports whether inst belongs to the shared/default capacity: its isolation
// mode is shared or empty.
func IsSharedInstance(inst *messages.CapacityDescriptor) bool {
	m := inst.GetIsolationMode()
	return m == "" || m == messages.IsolationShared
}

// Owns reports whether a dedicated or hybrid instance belongs to the tenant: the instance's
// TenantId equals tenantID, or its TenantGroupId equals tenantGroupID, each match requiring both
// sides non-empty. Shared instances are owned by nobody.
func Owns(inst *messages.CapacityDescriptor, tenantID, tenantGroupID string) bool {
	if inst == nil || IsSharedInstance(inst) {
		return false
	}
	if tenantID != "" && inst.TenantId == tenantID {
		return true
	}
	return tenantGroupID != "" && inst.TenantGroupId == tenantGroupID
}

// Visible reports whether the tenant (tenantID, tenantGroupID from its execution context
// snapshot, policy t) may see and use inst, by the seed 000 rules listed in the package doc.
// A nil t means Defaults(tenantID); a nil inst is never visible.
func Visible(inst *messages.CapacityDescriptor, tenantID, tenantGroupID string, t *messages.TenantSettings) bool {
	if inst == nil {
		return false
	}
	if !IsSharedInstance(inst) {
		return Owns(inst, tenantID, tenantGroupID)
	}
	if t == nil {
		t = Defaults(tenantID)
	}
	switch t.IsolationMode {
	case "", messages.IsolationShared:
		return true
	default:
		return t.AllowSharedFallback
	}
}

// FilterVisible returns the instances of insts that are Visible to the tenant, in their input
// order. The returned slice is new and owned by the caller; its elements are shared with insts.
func FilterVisible(insts []*messages.CapacityDescriptor, tenantID, groupID string, t *messages.TenantSettings) []*messages.CapacityDescriptor {
	out := make([]*messages.CapacityDescriptor, 0, len(insts))
	for _, inst := range insts {
		if Visible(inst, tenantID, groupID, t) {
			out = append(out, inst)
		}
	}
	return out
}

// InScope reports whether inst counts toward t's MaxRuntimeInstances, so that scale-out counts
// matching hosts by prefix and never by global host count (seed 000). The instance must carry
// t's runtime instance id prefix (its RuntimeInstanceIdPrefix field, or, when that is empty, an
// id of the form "<prefix>-<n>") and belong to t's scope: a shared instance for a shared tenant,
// an instance owned by t.TenantId or t.TenantGroupId for a dedicated or hybrid tenant.
// t is normalized first; a nil inst or t is never in scope.
func InScope(inst *messages.CapacityDescriptor, t *messages.TenantSettings) bool {
	if inst == nil || t == nil {
		return false
	}
	n := Normalize(t)
	if !hasPrefix(inst, n.RuntimeInstanceIdPrefix) {
		return false
	}
	if n.IsolationMode == messages.IsolationShared {
		return IsSharedInstance(inst)
	}
	return Owns(inst, n.TenantId, n.TenantGroupId)
}

func hasPrefix(inst *messages.CapacityDescriptor, prefix string) bool {
	if inst.RuntimeInstanceIdPrefix != "" {
		return inst.RuntimeInstanceIdPrefix == prefix
	}
	_, ok := parseOrdinal(prefix, inst.RuntimeInstanceId)
	return ok
}
