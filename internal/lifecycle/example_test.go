package lifecycle_test

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/lifecycle"
	"github.com/dairuntime/dair/messages"
)

func ExampleAdmit() {
	seen := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &messages.TenantState{TenantId: "acme", EnsuredAt: seen.UnixNano(), LastSeenAt: seen.UnixNano()}
	cfg := lifecycle.DefaultConfig()

	fmt.Println(lifecycle.Admit(lifecycle.Scope{State: st, Live: 1}))
	fmt.Println(lifecycle.ShouldScaleToZero(seen.Add(61*time.Minute), st, cfg))
	st.ScaledToZeroAt = seen.Add(61 * time.Minute).UnixNano()
	fmt.Println(lifecycle.Admit(lifecycle.Scope{State: st}), cfg.ColdStartAttempts())
	// Output:
	// proceed
	// true
	// cold_start 2
}
