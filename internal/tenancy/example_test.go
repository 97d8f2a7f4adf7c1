package tenancy_test

import (
	"fmt"

	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

func ExampleVisible() {
	tenantB := tenancy.Normalize(&messages.TenantSettings{
		TenantId: "tenant-b", IsolationMode: messages.IsolationHybrid, AllowSharedFallback: true,
	})
	shared := &messages.CapacityDescriptor{RuntimeInstanceId: "runtime-instance-1", IsolationMode: messages.IsolationShared}
	otherHybrid := &messages.CapacityDescriptor{RuntimeInstanceId: "tenant-c-runtime-1", IsolationMode: messages.IsolationHybrid, TenantId: "tenant-c"}
	fmt.Println(tenancy.Visible(shared, "tenant-b", "", tenantB))
	fmt.Println(tenancy.Visible(otherHybrid, "tenant-b", "", tenantB))
	// Output:
	// true
	// false
}

func ExampleNextInstanceID() {
	id, _ := tenancy.NextInstanceID("tenant-a-runtime", []string{"runtime-instance-1", "tenant-a-runtime-1"})
	fmt.Println(id)
	// Output: tenant-a-runtime-2
}

func ExampleEffectiveWorkers() {
	// Seed 000: an instance owns 30 workers, one execution may use at most 4.
	fmt.Println(tenancy.EffectiveWorkers(30, 4, 30))
	// Output: 4
}

func ExampleValidate() {
	t := tenancy.Normalize(&messages.TenantSettings{
		TenantId: "tenant-a", IsolationMode: messages.IsolationDedicated, AllowSharedFallback: true,
	})
	fmt.Println(tenancy.Validate(t))
	// Output: tenancy: invalid allow_shared_fallback: dedicated tenants must not fall back to shared capacity; use hybrid
}
