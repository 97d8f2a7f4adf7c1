package admission

import (
	"time"

	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Kind is the kind of an admission decision.
type Kind int

// Decision kinds, as seed 000 names them.
const (
	// AssignToInstance sends the run to Decision.InstanceID.
	AssignToInstance Kind = iota
	// QueueGlobally leaves the run in the shared queue for a later pump pass.
	QueueGlobally
	// RequestScaleOut asks for new capacity in the tenant's scope; the run waits for it.
	RequestScaleOut
	// Reject refuses the run.
	Reject
)

// String returns the snake_case name of k ("assign_to_instance", ...).
func (k Kind) String() string {
	switch k {
	case AssignToInstance:
		return "assign_to_instance"
	case QueueGlobally:
		return "queue_globally"
	case RequestScaleOut:
		return "request_scale_out"
	case Reject:
		return "reject"
	default:
		return "unknown"
	}
}

// Decision reasons (Decision.Reason). They are stable: ledgers and tests match on them.
const (
	ReasonMostAvailableSlots         = "most-available-slots"
	ReasonHybridSharedFallback       = "hybrid-shared-fallback"
	ReasonDedicatedSharedFallback    = "dedicated-shared-fallback"
	ReasonPreferDedicatedCapacity    = "prefer-dedicated-capacity"
	ReasonNoTenantVisibleCapacity    = "no-tenant-visible-capacity"
	ReasonAllVisibleCapacityBusy     = "all-visible-capacity-busy"
	ReasonMaxRuntimeInstancesReached = "max-runtime-instances-reached"
	ReasonScaleOutPending            = "scale-out-pending"
	ReasonScaleOutFailing            = "scale-out-failing"
	ReasonTenantSuspended            = "tenant-suspended"
	ReasonMissingExecutionContext    = "missing-execution-context"
	ReasonTenantSettingsMismatch     = "tenant-settings-mismatch"
	// Fair share and quota waits (rule 1b, 1c and 5): the run stays queued.
	ReasonTenantConcurrencyQuota = "tenant-concurrency-quota"
	ReasonTenantRateLimit        = "tenant-rate-limit"
	ReasonFairShare              = "fair-share"
)

// Input is everything Decide looks at. Decide does not modify it.
type Input struct {
	// Snapshot is the run's execution context; its TenantId and TenantGroupId are the identity
	// used for visibility. Required.
	Snapshot *messages.ExecutionContextSnapshot
	// Tenant is the tenant's policy. Nil means tenancy.Defaults(Snapshot.TenantId). It is
	// normalized again by Decide.
	Tenant *messages.TenantSettings
	// Instances is the live capacity registry. Nil entries are ignored.
	Instances []*messages.CapacityDescriptor
	// Reserved is the live reservation count per runtime instance id.
	Reserved map[string]int
	// PendingScaleOuts counts unfinished scale-out requests for the tenant's scope.
	PendingScaleOuts int
	// ScaleOutFailing reports that what PendingScaleOuts counts is the scope's last request,
	// which failed and cools down before the next: a run that waits for it waits because the
	// provider fails (ReasonScaleOutFailing), not for capacity on its way.
	ScaleOutFailing bool
	// Now is the decision time; heartbeats older than HeartbeatTimeout are stale.
	Now time.Time
	// HeartbeatTimeout defaults to DefaultHeartbeatTimeout when 0.
	HeartbeatTimeout time.Duration
	// RequiredWorkers is the execution's worker need; 0 means 1.
	RequiredWorkers int
	// TenantActive is the tenant's live concurrency holds (its dispatched and running runs
	// across all instances), checked against Tenant.MaxConcurrentRuns.
	TenantActive int
	// RateLimited is true when the tenant's dispatch rate bucket has no token now.
	RateLimited bool
	// Contended is true when other tenants have runs waiting in the shared queue too: a run
	// that finds no free capacity then waits for its fair-share turn.
	Contended bool
}

// Candidate records how Decide judged one instance.
type Candidate struct {
	InstanceID string
	Visible    bool
	Eligible   bool
	// Reason is ReasonNotVisible, or the reason returned by Eligible.
	Reason string
}

// Decision is the outcome of Decide.
type Decision struct {
	Kind Kind
	// InstanceID is set for AssignToInstance only.
	InstanceID string
	// Reason is a stable kebab-case Reason* constant.
	Reason string
	// Fallback is true when the run was assigned to shared capacity through shared fallback.
	Fallback bool
	// Considered lists every non-nil instance in input order. It is owned by the caller.
	Considered []Candidate
}

// Decide applies the decision rules of the package doc to in. It is deterministic and safe for
// concurrent use; it never returns an AssignToInstance decision for an instance that is not
// visible to the snapshot's tenant and eligible.
func Decide(in Input) Decision {
	snap := in.Snapshot
	if snap == nil || snap.TenantId == "" {
		return Decision{Kind: Reject, Reason: ReasonMissingExecutionContext}
	}
	if in.Tenant != nil && in.Tenant.TenantId != "" && in.Tenant.TenantId != snap.TenantId {
		return Decision{Kind: Reject, Reason: ReasonTenantSettingsMismatch}
	}
	t := tenancy.Defaults(snap.TenantId)
	if in.Tenant != nil {
		t = tenancy.Normalize(in.Tenant)
		t.TenantId = snap.TenantId
	}
	if t.Suspended {
		return Decision{Kind: Reject, Reason: ReasonTenantSuspended}
	}
	if t.MaxConcurrentRuns > 0 && in.TenantActive >= int(t.MaxConcurrentRuns) {
		return Decision{Kind: QueueGlobally, Reason: ReasonTenantConcurrencyQuota}
	}
	if in.RateLimited {
		return Decision{Kind: QueueGlobally, Reason: ReasonTenantRateLimit}
	}
	groupID := snap.TenantGroupId // identity comes from the snapshot, never from settings

	var owned, shared []*messages.CapacityDescriptor
	considered := make([]Candidate, 0, len(in.Instances))
	anyVisible := false
	scope := 0
	for _, inst := range in.Instances {
		if inst == nil {
			continue
		}
		if tenancy.InScope(inst, t) && inst.Status != messages.InstanceStopped && inst.Status != messages.InstanceUnhealthy {
			scope++
		}
		c := Candidate{InstanceID: inst.RuntimeInstanceId, Reason: ReasonNotVisible}
		if tenancy.Visible(inst, snap.TenantId, groupID, t) {
			anyVisible = true
			c.Visible = true
			c.Eligible, c.Reason = Eligible(inst, in.Reserved[inst.RuntimeInstanceId], in.Now, in.HeartbeatTimeout, in.RequiredWorkers)
		}
		considered = append(considered, c)
		if !c.Eligible {
			continue
		}
		if tenancy.IsSharedInstance(inst) {
			shared = append(shared, inst)
		} else {
			owned = append(owned, inst)
		}
	}
	Order(owned, in.Reserved)
	Order(shared, in.Reserved)
	canGrow := scope+in.PendingScaleOuts < int(t.MaxRuntimeInstances)

	d := decide(t, owned, shared, canGrow, anyVisible, in.PendingScaleOuts)
	if d.Reason == ReasonScaleOutPending && in.ScaleOutFailing {
		d.Reason = ReasonScaleOutFailing
	}
	if d.Kind == QueueGlobally && in.Contended {
		d.Reason = ReasonFairShare
	}
	d.Considered = considered
	return d
}

// decide holds rules 3 to 5 over the ordered candidate lists.
func decide(t *messages.TenantSettings, owned, shared []*messages.CapacityDescriptor, canGrow, anyVisible bool, pending int) Decision {
	assign := func(inst *messages.CapacityDescriptor, reason string, fallback bool) Decision {
		return Decision{Kind: AssignToInstance, InstanceID: inst.RuntimeInstanceId, Reason: reason, Fallback: fallback}
	}
	switch t.IsolationMode {
	case messages.IsolationDedicated:
		if len(owned) > 0 {
			return assign(owned[0], ReasonMostAvailableSlots, false)
		}
		if t.AllowSharedFallback && len(shared) > 0 {
			return assign(shared[0], ReasonDedicatedSharedFallback, true)
		}
	case messages.IsolationHybrid:
		if len(owned) > 0 {
			return assign(owned[0], ReasonMostAvailableSlots, false)
		}
		if t.PreferDedicatedCapacity && canGrow {
			return Decision{Kind: RequestScaleOut, Reason: ReasonPreferDedicatedCapacity}
		}
		if t.AllowSharedFallback && len(shared) > 0 {
			return assign(shared[0], ReasonHybridSharedFallback, true)
		}
	default:
		if len(shared) > 0 {
			return assign(shared[0], ReasonMostAvailableSlots, false)
		}
	}
	switch {
	case canGrow && !anyVisible:
		return Decision{Kind: RequestScaleOut, Reason: ReasonNoTenantVisibleCapacity}
	case canGrow:
		return Decision{Kind: RequestScaleOut, Reason: ReasonAllVisibleCapacityBusy}
	case pending > 0:
		return Decision{Kind: QueueGlobally, Reason: ReasonScaleOutPending}
	default:
		return Decision{Kind: QueueGlobally, Reason: ReasonMaxRuntimeInstancesReached}
	}
}
