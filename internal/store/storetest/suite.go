package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
)

// Factory returns a fresh, empty store using now as its clock. It registers its own cleanup
// (closing the store and removing its data) with t.
type Factory func(t *testing.T, now func() time.Time) store.Store

// epoch is the suite's starting time: a fixed instant so failures are reproducible.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is the per-test fixture: a fresh store, its clock and a context.
type env struct {
	st    store.Store
	clock *FakeClock
	ctx   context.Context
}

func newEnv(t *testing.T, newStore Factory) *env {
	t.Helper()
	clock := NewFakeClock(epoch)
	return &env{st: newStore(t, clock.Now), clock: clock, ctx: context.Background()}
}

// contractTest is one named contract check.
type contractTest struct {
	name string
	fn   func(t *testing.T, e *env)
}

// Run runs every contract test as a subtest of t. Each subtest gets a fresh store from
// newStore. Subtests do not run in parallel with each other.
func Run(t *testing.T, newStore Factory) {
	groups := []struct {
		name  string
		tests []contractTest
	}{
		{"Runs", runTests},
		{"Queue", queueTests},
		{"Registry", registryTests},
		{"Reservations", reservationTests},
		{"Assign", assignTests},
		{"Recovery", recoveryTests},
		{"Executions", executionTests},
		{"ExecutionLifecycle", execLifecycleTests},
		{"CommitFinisher", commitFinishTests},
		{"Ledger", ledgerTests},
		{"Tenants", tenantTests},
		{"ScaleOuts", scaleOutTests},
		{"Pipelines", pipelineTests},
		{"Usage", usageTests},
		{"Leases", leaseTests},
		{"TenantStates", tenantStateTests},
		{"InstanceRecords", instanceRecordTests},
		{"TenantQueues", tenantQueueTests},
		{"TenantQuotas", tenantQuotaTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.fn(t, newEnv(t, newStore))
				})
			}
		})
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func isErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = id(it)
	}
	return out
}

func equalIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// runConcurrently runs fn(i) for i in [0, n) on n goroutines and fails t on the first error.
func runConcurrently(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			errs <- fn(i)
		}()
	}
	close(start)
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		t.Fatalf("concurrent call: %v", first)
	}
}
