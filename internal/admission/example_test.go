package admission_test

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/admission"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

func ExampleDecide() {
	now := time.Unix(1_700_000_000, 0)
	shared := &messages.CapacityDescriptor{
		RuntimeInstanceId: "runtime-instance-1", Status: messages.InstanceReady,
		IsolationMode: messages.IsolationShared, CanAcceptRun: true,
		MaxConcurrentRuns: 3, AvailableRunSlots: 3, AvailableWorkerCount: 10,
		LastHeartbeatAt: now.UnixNano(),
	}
	in := admission.Input{
		Snapshot:  &messages.ExecutionContextSnapshot{TenantId: "tenant-b"},
		Tenant:    tenancy.SeedTenants()[1], // tenant-b: hybrid, prefers dedicated, may fall back
		Instances: []*messages.CapacityDescriptor{shared},
		Now:       now,
	}
	d := admission.Decide(in)
	fmt.Println(d.Kind, d.Reason)

	// With its two dedicated instances pending, tenant-b falls back to shared capacity.
	in.PendingScaleOuts = 2
	d = admission.Decide(in)
	fmt.Println(d.Kind, d.InstanceID, d.Reason, d.Fallback)
	// Output:
	// request_scale_out prefer-dedicated-capacity
	// assign_to_instance runtime-instance-1 hybrid-shared-fallback true
}

func ExampleEligible() {
	now := time.Unix(1_700_000_000, 0)
	inst := &messages.CapacityDescriptor{
		RuntimeInstanceId: "runtime-instance-1", Status: messages.InstanceReady, CanAcceptRun: true,
		MaxConcurrentRuns: 3, AvailableRunSlots: 3, AvailableWorkerCount: 10,
		LastHeartbeatAt: now.Add(-30 * time.Second).UnixNano(),
	}
	fmt.Println(admission.Eligible(inst, 0, now, 0, 1))
	// Output: false stale-heartbeat
}
