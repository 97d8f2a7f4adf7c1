package admission

import (
	"slices"
	"time"

	"github.com/dairuntime/dair/messages"
)

// RoleRuntime is the instance role that can run work (CapacityDescriptor.Roles).
const RoleRuntime = "runtime"

// DefaultHeartbeatTimeout is the heartbeat age after which an instance is stale when
// Input.HeartbeatTimeout is zero.
const DefaultHeartbeatTimeout = 10 * time.Second

// Eligibility reasons returned by Eligible; ReasonEligible when all conditions hold.
const (
	ReasonEligible             = "eligible"
	ReasonNotVisible           = "not-visible"
	ReasonNotRuntimeRole       = "not-runtime-role"
	ReasonNotReady             = "not-ready"
	ReasonQueuePaused          = "queue-paused"
	ReasonDraining             = "draining"
	ReasonStaleHeartbeat       = "stale-heartbeat"
	ReasonCannotAcceptRun      = "cannot-accept-run"
	ReasonNoRunSlots           = "no-run-slots"
	ReasonNoAvailableWorkers   = "no-available-workers"
	ReasonMaxLocalWorkersLimit = "max-local-workers-too-small"
	ReasonNilInstance          = "nil-instance"
)

// EffectiveAvailableRunSlots returns min(inst.AvailableRunSlots, inst.MaxConcurrentRuns -
// reserved), never below 0: the published free slots, capped by the live in-flight
// reservations held against the instance.
func EffectiveAvailableRunSlots(inst *messages.CapacityDescriptor, reserved int) int {
	if inst == nil {
		return 0
	}
	n := min(int(inst.AvailableRunSlots), int(inst.MaxConcurrentRuns)-reserved)
	return max(n, 0)
}

// Eligible reports whether inst may receive a run now, and the reason (ReasonEligible, or the
// first failed condition in the order listed in the package doc). reserved is the number of
// live reservations on inst; hbTimeout 0 means DefaultHeartbeatTimeout; requiredWorkers below 1
// means 1. A zero now disables the heartbeat staleness check; an instance that never sent a
// heartbeat (LastHeartbeatAt 0) is stale otherwise. Tenant visibility is not checked here.
func Eligible(inst *messages.CapacityDescriptor, reserved int, now time.Time, hbTimeout time.Duration, requiredWorkers int) (bool, string) {
	if inst == nil {
		return false, ReasonNilInstance
	}
	if hbTimeout <= 0 {
		hbTimeout = DefaultHeartbeatTimeout
	}
	requiredWorkers = max(requiredWorkers, 1)
	switch {
	case len(inst.Roles) > 0 && !slices.Contains(inst.Roles, RoleRuntime):
		return false, ReasonNotRuntimeRole
	case inst.Status != messages.InstanceReady:
		return false, ReasonNotReady
	case inst.IsQueuePaused:
		return false, ReasonQueuePaused
	case inst.IsDraining:
		return false, ReasonDraining
	case stale(inst.LastHeartbeatAt, now, hbTimeout):
		return false, ReasonStaleHeartbeat
	case !inst.CanAcceptRun:
		return false, ReasonCannotAcceptRun
	case EffectiveAvailableRunSlots(inst, reserved) <= 0:
		return false, ReasonNoRunSlots
	case inst.AvailableWorkerCount <= 0:
		return false, ReasonNoAvailableWorkers
	case inst.MaxLocalWorkersPerExecution > 0 && int(inst.MaxLocalWorkersPerExecution) < requiredWorkers:
		return false, ReasonMaxLocalWorkersLimit
	}
	return true, ReasonEligible
}

// stale reports whether a heartbeat at lastNanos (Unix nanoseconds) is older than timeout.
func stale(lastNanos int64, now time.Time, timeout time.Duration) bool {
	if now.IsZero() {
		return false
	}
	if lastNanos <= 0 {
		return true
	}
	return now.Sub(time.Unix(0, lastNanos)) > timeout
}
