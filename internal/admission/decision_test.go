package admission

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

func snap(tenant string) *messages.ExecutionContextSnapshot {
	return &messages.ExecutionContextSnapshot{TenantId: tenant}
}

func owned(id, mode, tenant string) *messages.CapacityDescriptor {
	return with(ready(id), func(d *messages.CapacityDescriptor) {
		d.IsolationMode = mode
		d.TenantId = tenant
	})
}

func busy(d *messages.CapacityDescriptor) *messages.CapacityDescriptor {
	d.AvailableRunSlots = 0
	return d
}

func seedTenant(id string) *messages.TenantSettings {
	for _, t := range tenancy.SeedTenants() {
		if t.TenantId == id {
			return t
		}
	}
	panic("no seed tenant " + id)
}

func tweak(t *messages.TenantSettings, mut func(*messages.TenantSettings)) *messages.TenantSettings {
	mut(t)
	return t
}

func TestKind_String(t *testing.T) {
	tests := []struct {
		k    Kind
		want string
	}{
		{AssignToInstance, "assign_to_instance"},
		{QueueGlobally, "queue_globally"},
		{RequestScaleOut, "request_scale_out"},
		{Reject, "reject"},
		{Kind(42), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.k.String(); got != tt.want {
				t.Fatalf("String = %q", got)
			}
		})
	}
}

func TestDecide_rules(t *testing.T) {
	const (
		sh = messages.IsolationShared
		de = messages.IsolationDedicated
		hy = messages.IsolationHybrid
	)
	tests := []struct {
		name     string
		in       Input
		kind     Kind
		instance string
		reason   string
		fallback bool
	}{
		// Rule 1.
		{"1: nil snapshot", Input{Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, Reject, "", ReasonMissingExecutionContext, false},
		{"1: empty tenant id", Input{Snapshot: snap("")}, Reject, "", ReasonMissingExecutionContext, false},
		{"1: suspended tenant", Input{Snapshot: snap("t1"), Tenant: tweak(tenancy.Defaults("t1"), func(s *messages.TenantSettings) { s.Suspended = true }),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, Reject, "", ReasonTenantSuspended, false},
		{"1: settings of another tenant", Input{Snapshot: snap("t1"), Tenant: tenancy.Defaults("t2")}, Reject, "", ReasonTenantSettingsMismatch, false},
		// Rule 1b: the tenant's concurrency quota.
		{"1b: concurrency quota reached", Input{Snapshot: snap("t1"), Tenant: tweak(tenancy.Defaults("t1"), func(s *messages.TenantSettings) { s.MaxConcurrentRuns = 2 }),
			TenantActive: 2, Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, QueueGlobally, "", ReasonTenantConcurrencyQuota, false},
		{"1b: concurrency quota has room", Input{Snapshot: snap("t1"), Tenant: tweak(tenancy.Defaults("t1"), func(s *messages.TenantSettings) { s.MaxConcurrentRuns = 2 }),
			TenantActive: 1, Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonMostAvailableSlots, false},
		{"1b: no quota is unlimited", Input{Snapshot: snap("t1"), TenantActive: 1000,
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonMostAvailableSlots, false},
		{"1b: suspension wins over the quota", Input{Snapshot: snap("t1"), Tenant: tweak(tenancy.Defaults("t1"), func(s *messages.TenantSettings) { s.MaxConcurrentRuns = 1; s.Suspended = true }),
			TenantActive: 1}, Reject, "", ReasonTenantSuspended, false},
		// Rule 1c: the tenant's dispatch rate.
		{"1c: rate limited", Input{Snapshot: snap("t1"), RateLimited: true,
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, QueueGlobally, "", ReasonTenantRateLimit, false},
		// Rule 2: invisible and ineligible instances are never candidates.
		{"2: invisible instance skipped", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"),
			Instances: []*messages.CapacityDescriptor{owned("tenant-c-runtime-1", de, "tenant-c"), owned("tenant-a-runtime-1", de, "tenant-a")}},
			AssignToInstance, "tenant-a-runtime-1", ReasonMostAvailableSlots, false},
		{"2: ineligible instance skipped", Input{Snapshot: snap("t1"), Instances: []*messages.CapacityDescriptor{
			with(ready("runtime-instance-1"), func(d *messages.CapacityDescriptor) { d.IsDraining = true; d.AvailableRunSlots = 3 }),
			with(ready("runtime-instance-2"), func(d *messages.CapacityDescriptor) { d.AvailableRunSlots = 1 })}},
			AssignToInstance, "runtime-instance-2", ReasonMostAvailableSlots, false},
		{"2: best by ordering", Input{Snapshot: snap("t1"), Instances: []*messages.CapacityDescriptor{
			with(ready("runtime-instance-1"), func(d *messages.CapacityDescriptor) { d.AvailableRunSlots = 1 }), ready("runtime-instance-2")}},
			AssignToInstance, "runtime-instance-2", ReasonMostAvailableSlots, false},
		{"2: reservations change the best", Input{Snapshot: snap("t1"), Reserved: map[string]int{"runtime-instance-1": 2},
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1"), with(ready("runtime-instance-2"), func(d *messages.CapacityDescriptor) { d.AvailableRunSlots = 2 })}},
			AssignToInstance, "runtime-instance-2", ReasonMostAvailableSlots, false},
		// Rule 3.
		{"3: shared tenant gets shared instance", Input{Snapshot: snap("default"), Tenant: seedTenant("default"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonMostAvailableSlots, false},
		{"3: unknown tenant defaults to shared", Input{Snapshot: snap("someone"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonMostAvailableSlots, false},
		{"3: dedicated tenant gets owned instance", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1"), owned("tenant-a-runtime-1", de, "tenant-a")}},
			AssignToInstance, "tenant-a-runtime-1", ReasonMostAvailableSlots, false},
		{"3: dedicated tenant never falls back to shared", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, RequestScaleOut, "", ReasonNoTenantVisibleCapacity, false},
		{"3: dedicated with fallback honours visibility", Input{Snapshot: snap("tenant-a"), Tenant: tweak(seedTenant("tenant-a"), func(s *messages.TenantSettings) { s.AllowSharedFallback = true }),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonDedicatedSharedFallback, true},
		{"3: group-owned dedicated instance", Input{Snapshot: &messages.ExecutionContextSnapshot{TenantId: "tenant-x", TenantGroupId: "g1"},
			Tenant:    tenancy.Normalize(&messages.TenantSettings{TenantId: "tenant-x", IsolationMode: de}),
			Instances: []*messages.CapacityDescriptor{with(owned("g1-runtime-1", de, ""), func(d *messages.CapacityDescriptor) { d.TenantGroupId = "g1" })}},
			AssignToInstance, "g1-runtime-1", ReasonMostAvailableSlots, false},
		// Rule 4.
		{"4: hybrid gets owned instance", Input{Snapshot: snap("tenant-b"), Tenant: seedTenant("tenant-b"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1"), owned("tenant-b-runtime-1", hy, "tenant-b")}},
			AssignToInstance, "tenant-b-runtime-1", ReasonMostAvailableSlots, false},
		{"4: hybrid prefers dedicated scale-out", Input{Snapshot: snap("tenant-b"), Tenant: seedTenant("tenant-b"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, RequestScaleOut, "", ReasonPreferDedicatedCapacity, false},
		{"4: hybrid at max falls back to shared", Input{Snapshot: snap("tenant-b"), Tenant: seedTenant("tenant-b"),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1"), busy(owned("tenant-b-runtime-1", hy, "tenant-b")), busy(owned("tenant-b-runtime-2", hy, "tenant-b"))}},
			AssignToInstance, "runtime-instance-1", ReasonHybridSharedFallback, true},
		{"4: hybrid with pending scale-out falls back", Input{Snapshot: snap("tenant-b"), Tenant: seedTenant("tenant-b"), PendingScaleOuts: 2,
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonHybridSharedFallback, true},
		{"4: hybrid not preferring dedicated falls back", Input{Snapshot: snap("tenant-b"), Tenant: tweak(seedTenant("tenant-b"), func(s *messages.TenantSettings) { s.PreferDedicatedCapacity = false }),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonHybridSharedFallback, true},
		{"4: unowned hybrid instance is never used", Input{Snapshot: snap("tenant-b"), Tenant: tweak(seedTenant("tenant-b"), func(s *messages.TenantSettings) { s.PreferDedicatedCapacity = false }),
			Instances: []*messages.CapacityDescriptor{owned("tenant-c-runtime-1", hy, "tenant-c")}}, RequestScaleOut, "", ReasonNoTenantVisibleCapacity, false},
		{"4: hybrid without fallback goes to rule 5", Input{Snapshot: snap("tenant-b"), Tenant: tweak(seedTenant("tenant-b"), func(s *messages.TenantSettings) { s.AllowSharedFallback = false }),
			PendingScaleOuts: 2, Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, QueueGlobally, "", ReasonScaleOutPending, false},
		// Rule 5.
		{"5: contended shared capacity waits for fair share", Input{Snapshot: snap("default"), Tenant: seedTenant("default"), Contended: true,
			Instances: []*messages.CapacityDescriptor{busy(ready("runtime-instance-1"))}}, QueueGlobally, "", ReasonFairShare, false},
		{"5: contention does not hide free capacity", Input{Snapshot: snap("default"), Tenant: seedTenant("default"), Contended: true,
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1")}}, AssignToInstance, "runtime-instance-1", ReasonMostAvailableSlots, false},
		{"5: contended scope that can grow still scales out", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"), Contended: true},
			RequestScaleOut, "", ReasonNoTenantVisibleCapacity, false},
		{"5: nothing visible requests scale-out", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a")}, RequestScaleOut, "", ReasonNoTenantVisibleCapacity, false},
		{"5: visible but busy requests scale-out", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"),
			Instances: []*messages.CapacityDescriptor{busy(owned("tenant-a-runtime-1", de, "tenant-a"))}}, RequestScaleOut, "", ReasonAllVisibleCapacityBusy, false},
		{"5: shared scope full queues globally", Input{Snapshot: snap("default"), Tenant: seedTenant("default"),
			Instances: []*messages.CapacityDescriptor{busy(ready("runtime-instance-1"))}}, QueueGlobally, "", ReasonMaxRuntimeInstancesReached, false},
		{"5: pending scale-out fills scope", Input{Snapshot: snap("default"), Tenant: seedTenant("default"), PendingScaleOuts: 1},
			QueueGlobally, "", ReasonScaleOutPending, false},
		{"5: a failed scale-out cooling down fills scope, and says so", Input{Snapshot: snap("default"), Tenant: seedTenant("default"),
			PendingScaleOuts: 1, ScaleOutFailing: true}, QueueGlobally, "", ReasonScaleOutFailing, false},
		{"5: scope counts prefix, not global hosts", Input{Snapshot: snap("tenant-a"), Tenant: tweak(seedTenant("tenant-a"), func(s *messages.TenantSettings) { s.MaxRuntimeInstances = 1 }),
			Instances: []*messages.CapacityDescriptor{ready("runtime-instance-1"), owned("tenant-b-runtime-1", hy, "tenant-b")}},
			RequestScaleOut, "", ReasonNoTenantVisibleCapacity, false},
		{"5: stopped instances do not fill scope", Input{Snapshot: snap("default"), Tenant: seedTenant("default"),
			Instances: []*messages.CapacityDescriptor{with(ready("runtime-instance-1"), func(d *messages.CapacityDescriptor) { d.Status = messages.InstanceStopped })}},
			RequestScaleOut, "", ReasonAllVisibleCapacityBusy, false},
		{"5: dedicated scope full", Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"), PendingScaleOuts: 1,
			Instances: []*messages.CapacityDescriptor{busy(owned("tenant-a-runtime-1", de, "tenant-a")), busy(owned("tenant-a-runtime-2", de, "tenant-a"))}},
			QueueGlobally, "", ReasonScaleOutPending, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.in)
			if d.Kind != tt.kind || d.InstanceID != tt.instance || d.Reason != tt.reason || d.Fallback != tt.fallback {
				t.Fatalf("Decide = %v %q %q fallback=%v; want %v %q %q fallback=%v",
					d.Kind, d.InstanceID, d.Reason, d.Fallback, tt.kind, tt.instance, tt.reason, tt.fallback)
			}
		})
	}
}

func TestDecide_considered(t *testing.T) {
	d := Decide(Input{Snapshot: snap("tenant-a"), Tenant: seedTenant("tenant-a"), Now: now,
		Instances: []*messages.CapacityDescriptor{
			ready("runtime-instance-1"),
			nil,
			with(owned("tenant-a-runtime-1", messages.IsolationDedicated, "tenant-a"), func(d *messages.CapacityDescriptor) { d.IsQueuePaused = true }),
			owned("tenant-a-runtime-2", messages.IsolationDedicated, "tenant-a"),
		}})
	want := []Candidate{
		{"runtime-instance-1", false, false, ReasonNotVisible},
		{"tenant-a-runtime-1", true, false, ReasonQueuePaused},
		{"tenant-a-runtime-2", true, true, ReasonEligible},
	}
	if len(d.Considered) != len(want) {
		t.Fatalf("Considered = %v", d.Considered)
	}
	for i := range want {
		if d.Considered[i] != want[i] {
			t.Fatalf("Considered[%d] = %+v, want %+v", i, d.Considered[i], want[i])
		}
	}
}

// TestDecide_neverAssignsInvisible checks over random registries that an assignment always
// names an instance that is visible to the snapshot's tenant and eligible.
func TestDecide_neverAssignsInvisible(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 51))
	tenants := []string{"tenant-a", "tenant-b", "tenant-c", "default"}
	groups := []string{"", "", "g1", "g2"}
	modes := []string{"", messages.IsolationShared, messages.IsolationDedicated, messages.IsolationHybrid}
	statuses := []string{messages.InstanceReady, messages.InstanceReady, messages.InstanceReady, messages.InstanceDraining, messages.InstanceStarting}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	assigned := 0
	for i := range 10000 {
		tenant := pick(tenants)
		settings := tenancy.Normalize(&messages.TenantSettings{
			TenantId: tenant, TenantGroupId: pick(groups), IsolationMode: pick(modes),
			PreferDedicatedCapacity: rng.IntN(2) == 0, AllowSharedFallback: rng.IntN(2) == 0,
			MaxRuntimeInstances: int32(rng.IntN(4) + 1),
		})
		in := Input{
			Snapshot: &messages.ExecutionContextSnapshot{TenantId: tenant, TenantGroupId: pick(groups)},
			Tenant:   settings, Reserved: map[string]int{}, PendingScaleOuts: rng.IntN(3),
			Now: now, RequiredWorkers: rng.IntN(4),
		}
		for j := range rng.IntN(8) {
			owner := pick(tenants)
			d := &messages.CapacityDescriptor{
				RuntimeInstanceId: owner + "-runtime-" + strconv.Itoa(j+1), Status: pick(statuses),
				IsolationMode: pick(modes), TenantId: owner, TenantGroupId: pick(groups),
				AvailableWorkerCount: int32(rng.IntN(3)), MaxLocalWorkersPerExecution: int32(rng.IntN(4)),
				MaxConcurrentRuns: int32(rng.IntN(5)), AvailableRunSlots: int32(rng.IntN(4)),
				IsQueuePaused: rng.IntN(8) == 0, IsDraining: rng.IntN(8) == 0, CanAcceptRun: rng.IntN(8) != 0,
				LastHeartbeatAt: now.Add(-time.Duration(rng.IntN(12)) * time.Second).UnixNano(),
				RunningRunCount: int32(rng.IntN(3)), QueuedRunCount: int32(rng.IntN(3)),
			}
			if rng.IntN(3) == 0 {
				d.TenantId = ""
			}
			in.Reserved[d.RuntimeInstanceId] = rng.IntN(2)
			in.Instances = append(in.Instances, d)
		}
		d := Decide(in)
		if d.Kind != AssignToInstance {
			if d.InstanceID != "" || d.Fallback {
				t.Fatalf("case %d: non-assign decision %+v carries an instance", i, d)
			}
			continue
		}
		assigned++
		var target *messages.CapacityDescriptor
		for _, inst := range in.Instances {
			if inst.RuntimeInstanceId == d.InstanceID {
				target = inst
			}
		}
		if target == nil {
			t.Fatalf("case %d: assigned unknown instance %q", i, d.InstanceID)
		}
		if !tenancy.Visible(target, in.Snapshot.TenantId, in.Snapshot.TenantGroupId, settings) {
			t.Fatalf("case %d: assigned %q not visible to %q: %v", i, d.InstanceID, tenant, target)
		}
		if ok, reason := Eligible(target, in.Reserved[target.RuntimeInstanceId], now, 0, in.RequiredWorkers); !ok {
			t.Fatalf("case %d: assigned %q not eligible: %s", i, d.InstanceID, reason)
		}
	}
	t.Logf("%d of 10000 random inputs assigned", assigned)
	if assigned == 0 {
		t.Fatalf("no random input was assigned; the generator is too strict")
	}
}
