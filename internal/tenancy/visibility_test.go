package tenancy

import (
	"testing"

	"github.com/dairuntime/dair/messages"
)

func inst(id, mode, tenant, group string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, IsolationMode: mode, TenantId: tenant, TenantGroupId: group}
}

func settings(id, group, mode string, fallback bool) *messages.TenantSettings {
	return Normalize(&messages.TenantSettings{TenantId: id, TenantGroupId: group, IsolationMode: mode, AllowSharedFallback: fallback})
}

func TestVisible_seedRules(t *testing.T) {
	const (
		sh = messages.IsolationShared
		de = messages.IsolationDedicated
		hy = messages.IsolationHybrid
	)
	tests := []struct {
		name     string
		inst     *messages.CapacityDescriptor
		tenant   string
		group    string
		settings *messages.TenantSettings
		want     bool
	}{
		{"shared instance visible to shared tenant", inst("runtime-instance-1", sh, "", ""), "t1", "", settings("t1", "", sh, false), true},
		{"unlabelled instance is shared", inst("runtime-instance-1", "", "", ""), "t1", "", settings("t1", "", sh, false), true},
		{"nil settings mean shared defaults", inst("runtime-instance-1", sh, "", ""), "t1", "", nil, true},
		{"shared instance visible to hybrid tenant with fallback", inst("runtime-instance-1", sh, "", ""), "tenant-b", "", settings("tenant-b", "", hy, true), true},
		{"shared instance hidden from hybrid tenant without fallback", inst("runtime-instance-1", sh, "", ""), "tenant-b", "", settings("tenant-b", "", hy, false), false},
		{"shared instance visible to dedicated tenant with fallback", inst("runtime-instance-1", sh, "", ""), "tenant-a", "", settings("tenant-a", "", de, true), true},
		{"shared instance hidden from dedicated tenant without fallback", inst("runtime-instance-1", sh, "", ""), "tenant-a", "", settings("tenant-a", "", de, false), false},
		{"dedicated instance visible to owner", inst("tenant-a-runtime-1", de, "tenant-a", ""), "tenant-a", "", settings("tenant-a", "", de, false), true},
		{"dedicated instance visible by group match", inst("g-runtime-1", de, "", "g1"), "tenant-x", "g1", settings("tenant-x", "g1", de, false), true},
		{"dedicated instance hidden on group mismatch", inst("g-runtime-1", de, "", "g1"), "tenant-x", "g2", settings("tenant-x", "g2", de, false), false},
		{"empty group ids never match", inst("x-runtime-1", de, "other", ""), "tenant-x", "", settings("tenant-x", "", de, false), false},
		{"dedicated never sees another tenant's dedicated", inst("tenant-c-runtime-1", de, "tenant-c", ""), "tenant-a", "", settings("tenant-a", "", de, false), false},
		{"dedicated instance hidden from shared tenant", inst("tenant-a-runtime-1", de, "tenant-a", ""), "t1", "", settings("t1", "", sh, true), false},
		{"dedicated instance hidden from hybrid tenant with fallback", inst("tenant-a-runtime-1", de, "tenant-a", ""), "tenant-b", "", settings("tenant-b", "", hy, true), false},
		{"hybrid instance visible to owner", inst("tenant-b-runtime-1", hy, "tenant-b", ""), "tenant-b", "", settings("tenant-b", "", hy, true), true},
		{"hybrid instance visible by group match", inst("g-runtime-1", hy, "", "g1"), "tenant-y", "g1", settings("tenant-y", "g1", hy, false), true},
		{"AllowSharedFallback does not make an unowned Hybrid runtime visible", inst("tenant-c-runtime-1", hy, "tenant-c", ""), "tenant-b", "", settings("tenant-b", "", hy, true), false},
		{"hybrid instance hidden from shared tenant", inst("tenant-b-runtime-1", hy, "tenant-b", ""), "t1", "", settings("t1", "", sh, true), false},
		{"identity comes from the caller, not settings", inst("tenant-a-runtime-1", de, "tenant-a", ""), "tenant-z", "", settings("tenant-a", "", de, false), false},
		{"nil instance", nil, "t1", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Visible(tt.inst, tt.tenant, tt.group, tt.settings); got != tt.want {
				t.Fatalf("Visible = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterVisible_keepsOrder(t *testing.T) {
	insts := []*messages.CapacityDescriptor{
		inst("tenant-b-runtime-1", messages.IsolationHybrid, "tenant-b", ""),
		inst("tenant-c-runtime-1", messages.IsolationHybrid, "tenant-c", ""),
		nil,
		inst("runtime-instance-1", messages.IsolationShared, "", ""),
	}
	got := FilterVisible(insts, "tenant-b", "", settings("tenant-b", "", messages.IsolationHybrid, true))
	if len(got) != 2 || got[0].RuntimeInstanceId != "tenant-b-runtime-1" || got[1].RuntimeInstanceId != "runtime-instance-1" {
		t.Fatalf("FilterVisible = %v", got)
	}
}

func TestInScope_prefixAndOwnership(t *testing.T) {
	a := settings("tenant-a", "", messages.IsolationDedicated, false)
	def := settings("default", "", messages.IsolationShared, true)
	withPrefix := func(d *messages.CapacityDescriptor, p string) *messages.CapacityDescriptor {
		d.RuntimeInstanceIdPrefix = p
		return d
	}
	tests := []struct {
		name string
		inst *messages.CapacityDescriptor
		t    *messages.TenantSettings
		want bool
	}{
		{"shared instance in shared scope", inst("runtime-instance-1", messages.IsolationShared, "", ""), def, true},
		{"shared instance by prefix field", withPrefix(inst("abc", "", "", ""), DefaultPrefix), def, true},
		{"shared instance not in dedicated scope", inst("runtime-instance-1", messages.IsolationShared, "", ""), a, false},
		{"owned dedicated instance in scope", inst("tenant-a-runtime-1", messages.IsolationDedicated, "tenant-a", ""), a, true},
		{"dedicated instance not in shared scope", inst("tenant-a-runtime-1", messages.IsolationDedicated, "tenant-a", ""), def, false},
		{"right prefix, other owner", inst("tenant-a-runtime-2", messages.IsolationDedicated, "tenant-z", ""), a, false},
		{"right owner, other prefix", inst("other-runtime-1", messages.IsolationDedicated, "tenant-a", ""), a, false},
		{"prefix field wins over id", withPrefix(inst("tenant-a-runtime-1", messages.IsolationDedicated, "tenant-a", ""), "x"), a, false},
		{"shared-mode instance with tenant prefix is not owned", inst("tenant-a-runtime-1", messages.IsolationShared, "tenant-a", ""), a, false},
		{"nil instance", nil, a, false},
		{"nil settings", inst("runtime-instance-1", "", "", ""), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InScope(tt.inst, tt.t); got != tt.want {
				t.Fatalf("InScope = %v, want %v", got, tt.want)
			}
		})
	}
}
