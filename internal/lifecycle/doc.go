// Package lifecycle decides the per-tenant runtime lifecycle of seed 001: when a tenant's
// capacity must be made ready (EnsureReady on the first request), when an idle scope scales to
// zero (IdleSweep), when a request must cold-start, when a scope is rejected (suspension),
// which instance records the weekly sweep deletes, and which instances a lowered
// MaxRuntimeInstances stops.
//
// The package is pure: no I/O, no goroutines, no clock of its own. Callers pass the time, the
// durable state (messages.TenantState, messages.InstanceRecord) and the live capacity
// descriptors; every function is safe for concurrent use and never mutates its arguments.
// The actors package drives it (tenant supervisor and tenant scope actors).
//
// # Rules (seed 001)
//
//  1. A request to a suspended tenant is rejected (HTTP 423) until it is resumed.
//  2. A request to a scope with live capacity proceeds and updates last-seen.
//  3. The first request of a scope (never ensured) makes its capacity ready without waiting
//     for it (EnsureReady returns once the capacity is scheduled).
//  4. A request to a scope scaled to zero and without live capacity cold-starts: it waits up to
//     ColdStartWait for capacity, retries ColdStartRetries times, then fails (HTTP 503).
//  5. A scope idle for IdleTimeout (no request since max(last seen, ensured)) scales to zero;
//     IdleSweep runs every IdleSweepInterval. Only idle instances (no queued or running run)
//     are stopped; busy ones wait for a later sweep.
//  6. Instance records at zero replicas for ZeroRetention (7 days) or more are deleted.
//  7. Lowering MaxRuntimeInstances stops idle instances only, down to the new maximum.
//
// A scope is a tenant for dedicated and hybrid isolation; shared tenants share one scope per
// runtime instance id prefix (ScopeKey), so shared capacity scales to zero only when no shared
// tenant was seen for IdleTimeout.
//
// # Usage
//
//	cfg := lifecycle.DefaultConfig()
//	switch lifecycle.Admit(lifecycle.Scope{State: st, Suspended: t.Suspended, Live: live}) {
//	case lifecycle.Reject:
//		return ErrTenantSuspended
//	case lifecycle.ColdStart:
//		for try := 0; try < cfg.ColdStartAttempts(); try++ { /* request capacity, wait */ }
//	}
//	if lifecycle.ShouldScaleToZero(now, st, cfg) {
//		stop(lifecycle.ScaleIn(insts, 0))
//	}
//	deleteRecords(lifecycle.Expired(now, records, cfg))
package lifecycle
