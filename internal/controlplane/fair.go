package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dairuntime/dair/internal/admission"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// FairStore is the dispatcher's optional fair-share and quota capability: per-tenant queues
// and atomic tenant holds and rate buckets. Both store backends have it; over a store without
// it the dispatcher claims first come, first served and applies no tenant quota.
type FairStore interface {
	store.TenantQueues
	store.TenantQuotas
}

// ErrTenantQueueFull is returned by QueueRoom when a tenant has max_queued_runs queued runs.
var ErrTenantQueueFull = errors.New("controlplane: tenant queue full")

// QueueFullError is the refusal of a submit beyond the tenant's max_queued_runs. It matches
// ErrTenantQueueFull.
type QueueFullError struct {
	TenantID string
	Queued   int
	Max      int
	// RetryAfter is a hint of when a queued run may have left the queue.
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("controlplane: tenant %s has %d queued runs (max_queued_runs %d); retry later", e.TenantID, e.Queued, e.Max)
}

// Unwrap returns ErrTenantQueueFull.
func (e *QueueFullError) Unwrap() error { return ErrTenantQueueFull }

// queueFullRetryAfter is the Retry-After hint of a full tenant queue.
const queueFullRetryAfter = time.Second

// QueueRoom returns a *QueueFullError when t's queue already holds t.MaxQueuedRuns runs
// (queued or claimed), nil when it has room or no limit. A store without per-tenant queues
// has no limit. It blocks on one store read. Concurrent submits may overshoot the limit by
// their number: the check and the enqueue are not one atomic step.
func QueueRoom(ctx context.Context, st any, t *messages.TenantSettings) error {
	fs, ok := st.(store.TenantQueues)
	if !ok || t.GetMaxQueuedRuns() <= 0 {
		return nil
	}
	n, err := fs.QueuedCount(ctx, t.TenantId)
	if err != nil {
		return fmt.Errorf("count queued runs: %w", err)
	}
	if n >= int(t.MaxQueuedRuns) {
		return &QueueFullError{TenantID: t.TenantId, Queued: n, Max: int(t.MaxQueuedRuns), RetryAfter: queueFullRetryAfter}
	}
	return nil
}

// fairness is the dispatcher's fair-share state: the start-time fair queuing planner of
// package admission and the tenants seen waiting by the last claim.
type fairness struct {
	st FairStore
	mu sync.Mutex
	// sched and waiting are guarded by mu.
	sched   admission.FairShare
	waiting map[string]bool
	// more is set when the last claim left planned-out runs pending.
	more bool
}

// claim takes the cycle's batch in fair order: it reads the per-tenant backlog, plans up to
// batch runs by weight (admission.FairShare), claims them per tenant in one store call, and
// returns the claims interleaved as planned, so the batch's dispatches start in fair order.
// With nothing planned it falls back to a plain claim (which also returns dead pumps' claims).
func (d *Dispatcher) claim(ctx context.Context, pumpID string) ([]store.Claim, error) {
	f := d.fair
	if f == nil {
		return d.st.Claim(ctx, pumpID, d.cfg.Batch, d.cfg.QueueVisibility)
	}
	backlog, err := f.st.Backlog(ctx, d.cfg.Batch)
	if err != nil {
		return nil, err
	}
	in := make([]admission.Backlog, 0, len(backlog))
	waiting := make(map[string]bool, len(backlog))
	for _, b := range backlog {
		waiting[b.TenantID] = true
		t, err := d.cfg.Tenants.Get(ctx, b.TenantID)
		if err != nil {
			return nil, err
		}
		room := -1
		if t.MaxConcurrentRuns > 0 {
			n, err := d.st.ReservationCount(ctx, store.TenantHolds(b.TenantID))
			if err != nil {
				return nil, fmt.Errorf("count tenant holds: %w", err)
			}
			room = max(int(t.MaxConcurrentRuns)-n, 0)
		}
		if burst := tenancy.Burst(t); burst > 0 && (room < 0 || room > burst) {
			room = burst // a rate-limited tenant cannot start more than its bucket in one cycle
		}
		in = append(in, admission.Backlog{TenantID: b.TenantID, Weight: int(t.Weight), Pending: b.Pending, Room: room})
	}
	n, err := d.claimSize(ctx)
	if err != nil {
		return nil, err
	}
	pending := 0
	for _, b := range in {
		pending += b.Pending
	}
	f.mu.Lock()
	plan := f.sched.Plan(in, n)
	f.waiting = waiting
	f.more = len(plan) < pending
	f.mu.Unlock()
	if len(plan) == 0 {
		return d.st.Claim(ctx, pumpID, d.cfg.Batch, d.cfg.QueueVisibility)
	}
	return d.claimPlan(ctx, pumpID, append(plan, behindQuota(in, plan)...))
}

// behindQuota returns, for each tenant of backlog whose quota bounds its room below its
// pending runs, up to fairSlack more of its runs than plan takes: claimed after the planned
// runs, they decide after the tenant's planned runs and, when those wait for the quota, wait
// behind them for the same reason (cycleWaits), so the runs queued behind a tenant's head show
// why they wait too; they take no planned run's place.
func behindQuota(backlog []admission.Backlog, plan []string) []string {
	planned := map[string]int{}
	for _, id := range plan {
		planned[id]++
	}
	var out []string
	for _, b := range backlog {
		if b.Room < 0 {
			continue
		}
		for range min(b.Pending-planned[b.TenantID], fairSlack) {
			out = append(out, b.TenantID)
		}
	}
	return out
}

// fairSlack is how many runs a fair claim takes beyond the free run slots it sees: enough to
// look at the head runs of waiting tenants (recording why they wait, asking for scale-out),
// few enough that a contended pool does not spend its cycles re-admitting runs that cannot go.
const fairSlack = 8

// claimSize is the size of a fair claim: the run slots the registry shows free on instances
// that take runs, plus fairSlack, at most Batch. The published slots may be a heartbeat old:
// a stale view costs a cycle, never an over-commit (reservations are atomic).
func (d *Dispatcher) claimSize(ctx context.Context) (int, error) {
	insts, err := d.st.ListInstances(ctx)
	if err != nil {
		return 0, fmt.Errorf("list instances: %w", err)
	}
	free := 0
	for _, x := range insts {
		if x.Status == messages.InstanceReady && !x.IsQueuePaused && !x.IsDraining && x.CanAcceptRun {
			free += max(int(x.AvailableRunSlots), 0)
		}
	}
	return min(d.cfg.Batch, free+fairSlack), nil
}

// claimPlan claims the runs of plan (a tenant id per run) and orders them as planned.
func (d *Dispatcher) claimPlan(ctx context.Context, pumpID string, plan []string) ([]store.Claim, error) {
	counts := map[string]int{}
	var want []store.TenantClaim
	for _, id := range plan {
		if counts[id] == 0 {
			want = append(want, store.TenantClaim{TenantID: id})
		}
		counts[id]++
	}
	for i := range want {
		want[i].Max = counts[want[i].TenantID]
	}
	claims, err := d.fair.st.ClaimTenants(ctx, pumpID, want, d.cfg.QueueVisibility)
	if err != nil {
		return nil, err
	}
	// ClaimTenants answers tenant by tenant, in want order: deal them out in plan order.
	byTenant := map[string][]store.Claim{}
	i := 0
	for _, w := range want {
		n := min(w.Max, len(claims)-i)
		for _, c := range claims[i : i+n] {
			byTenant[w.TenantID] = append(byTenant[w.TenantID], c)
		}
		i += n
	}
	out := make([]store.Claim, 0, len(claims))
	for _, id := range plan {
		if q := byTenant[id]; len(q) > 0 {
			out = append(out, q[0])
			byTenant[id] = q[1:]
		}
	}
	return out, nil
}

// Backlogged reports whether the last fair claim left runs pending that it could have taken
// with a bigger batch: a cycle that made progress should run again at once, as after a full
// batch. It is goroutine-safe.
func (d *Dispatcher) Backlogged() bool {
	f := d.fair
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.more
}

// contended reports whether another tenant than tenantID had runs waiting at the last claim.
func (d *Dispatcher) contended(tenantID string) bool {
	f := d.fair
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.waiting {
		if id != tenantID {
			return true
		}
	}
	return false
}

// Reservation outcomes of holdSlot.
const (
	slotHeld = iota
	slotFull
	slotTenantFull
	slotRateLimited
)

// holdSlot takes a token of t's rate bucket (when t has a rate), then holds a slot of x and,
// atomically with it, one of t's concurrency slots. A run held on shared capacity is charged
// to its tenant's fair share.
func (d *Dispatcher) holdSlot(ctx context.Context, run *messages.SharedRun, t *messages.TenantSettings, x *messages.CapacityDescriptor) (int, error) {
	f := d.fair
	if f == nil {
		ok, err := d.st.Reserve(ctx, x.RuntimeInstanceId, run.SharedRunId, int(x.MaxConcurrentRuns), d.cfg.ReservationTTL)
		if err != nil || !ok {
			return slotFull, err
		}
		return slotHeld, nil
	}
	if t.RunsPerSecond > 0 {
		ok, err := f.st.TakeToken(ctx, t.TenantId, t.RunsPerSecond, tenancy.Burst(t))
		if err != nil {
			return slotFull, fmt.Errorf("take rate token: %w", err)
		}
		if !ok {
			return slotRateLimited, nil
		}
	}
	ok, tenantFull, err := f.st.ReserveForTenant(ctx, x.RuntimeInstanceId, run.SharedRunId, int(x.MaxConcurrentRuns),
		t.TenantId, int(t.MaxConcurrentRuns), d.cfg.ReservationTTL)
	switch {
	case err != nil:
		return slotFull, err
	case tenantFull:
		return slotTenantFull, nil
	case !ok:
		return slotFull, nil
	}
	if tenancy.IsSharedInstance(x) {
		f.mu.Lock()
		f.sched.Charge(t.TenantId, int(t.Weight))
		f.mu.Unlock()
	}
	return slotHeld, nil
}

// quotaWait reports whether reason is a tenant quota's wait.
func quotaWait(reason string) bool {
	return reason == admission.ReasonTenantConcurrencyQuota || reason == admission.ReasonTenantRateLimit
}

// fullReason is the wait reason of a run whose chosen instances were all full: fair-share
// while other tenants wait for the same capacity, else no-free-slot.
func (d *Dispatcher) fullReason(run *messages.SharedRun) string {
	if d.contended(run.GetSnapshot().GetTenantId()) {
		return admission.ReasonFairShare
	}
	return ReasonNoFreeSlot
}
