package store

import (
	"context"
	"time"
)

// TenantBacklog is how many runs of one tenant wait (pending, not claimed) in the shared queue.
type TenantBacklog struct {
	TenantID string
	Pending  int
}

// TenantClaim asks for up to Max pending items of TenantID.
type TenantClaim struct {
	TenantID string
	Max      int
}

// TenantQueues is the shared queue seen per tenant, for weighted fair dispatch: every queue
// item belongs to the tenant it was enqueued for (Queue.Enqueue reads it from the run; a run
// that does not exist is filed under tenant ""), and each tenant's pending items keep their
// queue order. Claims, acks and releases of Queue apply to the same items.
type TenantQueues interface {
	// EnqueueTenant is Queue.Enqueue for a run of tenantID, without reading the run.
	EnqueueTenant(ctx context.Context, tenantID, runID string) error
	// Backlog returns the tenants that have pending items, by tenant id, each with its pending
	// count capped at limit (limit <= 0: exact).
	Backlog(ctx context.Context, limit int) ([]TenantBacklog, error)
	// ClaimTenants is Queue.Claim taking, for each entry of want in order, up to Max oldest
	// pending items of its tenant. Timed-out claims are pending again first. The answer lists
	// the claims in the order of want.
	ClaimTenants(ctx context.Context, pumpID string, want []TenantClaim, visibility time.Duration) ([]Claim, error)
	// QueuedCount returns how many items of tenantID are in the queue, pending or claimed.
	QueuedCount(ctx context.Context, tenantID string) (int, error)
}

// TenantHoldsPrefix starts the pseudo instance id under which a tenant's concurrency holds are
// kept: ReservationCount(TenantHolds(t)) is tenant t's live concurrency.
const TenantHoldsPrefix = "#tenant/"

// TenantHolds returns the reservation key of tenantID's concurrency holds.
func TenantHolds(tenantID string) string { return TenantHoldsPrefix + tenantID }

// TenantQuotas are the atomic tenant quota primitives of the dispatcher.
type TenantQuotas interface {
	// ReserveForTenant is Reservations.Reserve of one slot of instanceID (below limit) that
	// also holds one of tenantID's concurrency slots (below tenantLimit; <= 0 means no limit),
	// both or neither. tenantFull reports that the tenant's limit refused it. The tenant hold
	// follows the instance hold: RefreshReservations and ReleaseReservation of instanceID for
	// runID refresh and drop it too, so it lives as long as the run holds its instance slot.
	ReserveForTenant(ctx context.Context, instanceID, runID string, limit int, tenantID string, tenantLimit int,
		ttl time.Duration) (ok, tenantFull bool, err error)
	// TakeToken takes one token from tenantID's dispatch rate bucket (refilled at rate per
	// second up to burst) and reports whether there was one. The bucket lives in the store, so
	// the rate holds across control planes.
	TakeToken(ctx context.Context, tenantID string, rate float64, burst int) (bool, error)
}
