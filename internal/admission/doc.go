// Package admission decides where a shared run goes: AssignToInstance, QueueGlobally,
// RequestScaleOut or Reject, each with a stable kebab-case reason for the ledger. It applies
// seed 000's tenant visibility (package tenancy), instance eligibility and recommended ordering
// to a snapshot of the capacity registry.
//
// The package is pure and deterministic: no I/O, no goroutines, no clock (the caller passes
// Now). Decide never offers an instance that is not visible to the tenant of the execution
// context snapshot, nor one that is not eligible. Its result is a decision only: the caller
// reserves the run slot, routes to a provider and records the ledger entry.
//
// # Eligibility
//
// An instance is eligible when, in this order (the first failure names the reason): its roles
// are empty or include "runtime"; its status is ready; its queue is not paused; it is not
// draining; its heartbeat is fresh; it can accept a run; its effective available run slots
// (min(available_run_slots, max_concurrent_runs - reserved)) are above zero; it has an
// available worker; and its max local workers per execution (0 = no cap) is at least the
// execution's required workers.
//
// # Ordering
//
// Eligible candidates are ordered as the seed recommends: effective available run slots
// descending, available workers descending, running runs ascending, queued runs ascending,
// last heartbeat descending, runtime instance id ascending (byte-wise).
//
// # Decision rules
//
//  1. A nil snapshot or an empty tenant id is rejected ("missing-execution-context"); settings
//     for another tenant are rejected ("tenant-settings-mismatch"); a suspended tenant is
//     rejected ("tenant-suspended").
//     1b. A tenant whose live concurrency holds (Input.TenantActive) reached its
//     max_concurrent_runs (0: unlimited) gets QueueGlobally ("tenant-concurrency-quota").
//     1c. A tenant whose dispatch rate bucket is empty (Input.RateLimited) gets QueueGlobally
//     ("tenant-rate-limit").
//  2. Candidates are the instances both visible (tenancy.Visible) and eligible, ordered as
//     above, split into owned (dedicated/hybrid instances of the tenant or its group) and shared.
//  3. A Shared tenant is assigned the best shared candidate ("most-available-slots"). A Dedicated
//     tenant is assigned the best owned candidate; a shared candidate only when its settings allow
//     shared fallback (validation forbids that, but the visibility rule is honoured), then with
//     Fallback set ("dedicated-shared-fallback").
//  4. A Hybrid tenant is assigned the best owned candidate. Otherwise, when it prefers dedicated
//     capacity and its scope can grow, it gets RequestScaleOut ("prefer-dedicated-capacity").
//     Otherwise, when it allows shared fallback and a shared candidate exists, it is assigned
//     that candidate with Fallback set ("hybrid-shared-fallback"). Otherwise rule 5 applies.
//  5. With no candidate: when the scope can grow, RequestScaleOut ("no-tenant-visible-capacity"
//     when no instance is visible, else "all-visible-capacity-busy"); else when scale-outs are
//     pending, QueueGlobally ("scale-out-pending"); else QueueGlobally
//     ("max-runtime-instances-reached"). Either QueueGlobally is "fair-share" instead when
//     other tenants are waiting too (Input.Contended): the run waits for its weighted turn.
//
// The scope can grow when the number of live instances in the tenant's scope (tenancy.InScope,
// not counting stopped or unhealthy instances) plus PendingScaleOuts is below the tenant's
// MaxRuntimeInstances.
//
// Decision.Considered lists every instance looked at, including instances that are not visible
// to the tenant. Surfaces that show a ledger to a tenant should drop entries with Visible false.
//
// # Usage
//
//	d := admission.Decide(admission.Input{
//		Snapshot:         run.Context,
//		Tenant:           tenancy.Normalize(settings),
//		Instances:        descriptors,
//		Reserved:         reservations,
//		PendingScaleOuts: pending,
//		Now:              clock.Now(),
//	})
//	switch d.Kind {
//	case admission.AssignToInstance:
//		// reserve a slot on d.InstanceID, then dispatch through the provider router
//	case admission.RequestScaleOut:
//		// persist a scale-out request carrying the tenant settings
//	}
package admission
