// Package controlplane holds the control-plane services of a dair node, one concern each,
// around the pure decisions of internal/admission, internal/tenancy and internal/lifecycle:
//
//   - Dispatcher: the shared-queue pump cycle, the admission shell, the atomic slot
//     reservation and delivery through the provider router (dispatcher.go, delivery.go).
//     Over a store.Assigner (both backends) it takes the fast path (fastpath.go, view.go): one
//     claim call per cycle that returns the runs, decisions on a cached instance view with a
//     bounded staleness, and one atomic Assign call per decision; HandOff lets a submit skip
//     the pump when the view shows room.
//   - Scaler: durable scale-out requests, their processing under a renewed lease, and the
//     requeue of the runs parked on them (scaler.go).
//   - Recoverer: lost members (tombstones), lost instances, lost dispatches and runs whose
//     execution is alive nowhere (JudgeOrphan, orphans.go), fencing by epoch, and repair of
//     runs a crash left between two writes (recoverer.go); the runs of lost instances, moved
//     at once on a member loss and in batches over a store.Recovery (PlaceRun,
//     TakeForRecovery, lostruns.go); the members' liveness leases, the pure verdict on a peer
//     and when to look at the peers next (JudgeMember, NextLivenessCheck, liveness.go).
//   - Reconciler: instance health (stale heartbeats, open circuits) and replacement capacity
//     (reconciler.go); Circuits is the dispatch breaker both share (circuits.go).
//   - Lifecycle: the per-tenant runtime lifecycle of seed 001: admission hook, cold start,
//     idle and weekly sweeps, suspension (lifecycle.go, sweep.go); Scope is the state one
//     tenant scope actor owns (scope.go).
//   - Tenants: tenant settings, cached briefly (tenants.go).
//
// The services hold no goroutines of their own and no actor references: the actors package
// drives them from thin actor shells (pump, recovery coordinator, health reconciler, scale-out
// request, tenant scope) on the node's worker group, and passes in what they need as narrow
// interfaces: the store interfaces they use, a Ledger, provider routers, a Group for the
// scaler's lease renewal, and hooks that wake the pump or the scale-out supervisor. Every
// service is goroutine-safe, keeps its state in the store, and blocks on store and provider
// I/O in the caller's goroutine; a service is unit-tested on the embedded store.
//
// # Usage
//
//	tenants := controlplane.NewTenants(st, controlplane.TenantsConfig{})
//	scaler, err := controlplane.NewScaler(st, controlplane.ScalerConfig{Holder: incarnation,
//		Router: registry, Ledger: writer, Tenants: tenants, Group: group})
//	dispatcher, err := controlplane.NewDispatcher(st, controlplane.DispatcherConfig{Router: registry,
//		Ledger: writer, Tenants: tenants, Scaler: scaler})
//	claimed, settled, err := dispatcher.Cycle(ctx, controlplane.PumpID(nodeID))
package controlplane
