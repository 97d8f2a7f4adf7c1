package tenancy

import (
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// DefaultPrefix is the runtime instance id prefix of the shared/default runtime scope.
const DefaultPrefix = "runtime-instance"

// Default values of the "default / test-tenant" settings of seed 000. LocalQueueCapacity is not
// listed by the seed for that tenant; dair uses DefaultLocalQueueCapacity.
const (
	DefaultMaxRuntimeInstances          = 1
	DefaultWorkerCountPerInstance       = 10
	DefaultMaxConcurrentRunsPerInstance = 3
	DefaultLocalQueueCapacity           = 100
	// DefaultWeight is a tenant's fair-share weight when its settings give none.
	DefaultWeight = 1
)

// Defaults returns the settings of a tenant that has none stored: Shared isolation, the
// DefaultPrefix scope, PreferDedicatedCapacity false, AllowSharedFallback true,
// MaxRuntimeInstances 1, WorkerCountPerInstance 10, MaxConcurrentRunsPerInstance 3,
// LocalQueueCapacity 100, MaxLocalWorkersPerExecution equal to the worker count, Weight 1 and
// no quotas.
//
// The caller owns the returned value.
func Defaults(tenantID string) *messages.TenantSettings {
	return &messages.TenantSettings{
		TenantId:                     tenantID,
		IsolationMode:                messages.IsolationShared,
		PreferDedicatedCapacity:      false,
		AllowSharedFallback:          true,
		RuntimeInstanceIdPrefix:      DefaultPrefix,
		MaxRuntimeInstances:          DefaultMaxRuntimeInstances,
		WorkerCountPerInstance:       DefaultWorkerCountPerInstance,
		MaxConcurrentRunsPerInstance: DefaultMaxConcurrentRunsPerInstance,
		LocalQueueCapacity:           DefaultLocalQueueCapacity,
		MaxLocalWorkersPerExecution:  DefaultWorkerCountPerInstance,
		Weight:                       DefaultWeight,
	}
}

// SeedTenants returns the validated tenant settings listed by seed 000: tenant-a (Dedicated),
// tenant-b (Hybrid) and default (Shared), in that order. Fields the seed does not list are
// filled by Normalize. The caller owns the returned values.
func SeedTenants() []*messages.TenantSettings {
	seed := []*messages.TenantSettings{
		{
			TenantId:                     "tenant-a",
			IsolationMode:                messages.IsolationDedicated,
			PreferDedicatedCapacity:      true,
			AllowSharedFallback:          false,
			RuntimeInstanceIdPrefix:      "tenant-a-runtime",
			MaxRuntimeInstances:          3,
			WorkerCountPerInstance:       10,
			MaxConcurrentRunsPerInstance: 5,
			LocalQueueCapacity:           500,
		},
		{
			TenantId:                     "tenant-b",
			IsolationMode:                messages.IsolationHybrid,
			PreferDedicatedCapacity:      true,
			AllowSharedFallback:          true,
			RuntimeInstanceIdPrefix:      "tenant-b-runtime",
			MaxRuntimeInstances:          2,
			WorkerCountPerInstance:       5,
			MaxConcurrentRunsPerInstance: 3,
			LocalQueueCapacity:           250,
		},
		Defaults("default"),
	}
	out := make([]*messages.TenantSettings, len(seed))
	for i, t := range seed {
		out[i] = Normalize(t)
	}
	return out
}

// Normalize returns a copy of t with zero fields filled by defaults:
//
//   - IsolationMode "" becomes shared; other values are trimmed and lowercased.
//   - RuntimeInstanceIdPrefix "" becomes DefaultPrefix for shared tenants and
//     "<tenant_id>-runtime" for dedicated and hybrid tenants.
//   - MaxRuntimeInstances, WorkerCountPerInstance, MaxConcurrentRunsPerInstance and
//     LocalQueueCapacity 0 become the Default* constants.
//   - MaxLocalWorkersPerExecution 0 becomes WorkerCountPerInstance.
//   - Weight 0 becomes DefaultWeight. The quotas (MaxConcurrentRuns, MaxQueuedRuns,
//     RunsPerSecond, RunsBurst) keep 0, which means unlimited (see Burst for RunsBurst).
//
// Booleans cannot be told apart from unset and are kept. Negative values are kept so that
// Validate reports them. A nil t yields Defaults(""). t is not modified; the caller owns the
// result.
func Normalize(t *messages.TenantSettings) *messages.TenantSettings {
	if t == nil {
		return Defaults("")
	}
	n, ok := proto.Clone(t).(*messages.TenantSettings)
	if !ok {
		return Defaults(t.GetTenantId())
	}
	n.IsolationMode = strings.ToLower(strings.TrimSpace(n.IsolationMode))
	if n.IsolationMode == "" {
		n.IsolationMode = messages.IsolationShared
	}
	if n.RuntimeInstanceIdPrefix == "" {
		n.RuntimeInstanceIdPrefix = DefaultPrefix
		if n.IsolationMode != messages.IsolationShared && n.TenantId != "" {
			n.RuntimeInstanceIdPrefix = n.TenantId + "-runtime"
		}
	}
	if n.MaxRuntimeInstances == 0 {
		n.MaxRuntimeInstances = DefaultMaxRuntimeInstances
	}
	if n.WorkerCountPerInstance == 0 {
		n.WorkerCountPerInstance = DefaultWorkerCountPerInstance
	}
	if n.MaxConcurrentRunsPerInstance == 0 {
		n.MaxConcurrentRunsPerInstance = DefaultMaxConcurrentRunsPerInstance
	}
	if n.LocalQueueCapacity == 0 {
		n.LocalQueueCapacity = DefaultLocalQueueCapacity
	}
	if n.MaxLocalWorkersPerExecution == 0 {
		n.MaxLocalWorkersPerExecution = n.WorkerCountPerInstance
	}
	if n.Weight == 0 {
		n.Weight = DefaultWeight
	}
	return n
}

// CapacityFor returns the per-instance capacity a runtime instance created in t's scope should
// publish: its worker count, maximum concurrent runs, local queue capacity and maximum local
// workers per execution, after Normalize.
func CapacityFor(t *messages.TenantSettings) (workers, maxConcurrent, queueCap, maxLocal int) {
	n := Normalize(t)
	return int(n.WorkerCountPerInstance), int(n.MaxConcurrentRunsPerInstance),
		int(n.LocalQueueCapacity), int(n.MaxLocalWorkersPerExecution)
}

// EffectiveWorkers returns the number of local workers one execution may use on an instance:
// min(workerCount, maxLocalWorkersPerExecution, availableWorkers) as seed 000 resolves it.
// A maxLocalWorkersPerExecution of 0 (or less) adds no cap. The result is never below 0.
func EffectiveWorkers(workerCount, maxLocalWorkersPerExecution, availableWorkers int) int {
	n := min(workerCount, availableWorkers)
	if maxLocalWorkersPerExecution > 0 {
		n = min(n, maxLocalWorkersPerExecution)
	}
	return max(n, 0)
}

// Burst returns the token bucket size of t's dispatch rate limit: RunsBurst when set, else
// max(1, ceil(RunsPerSecond)). It is 0 when t has no rate limit (RunsPerSecond 0).
func Burst(t *messages.TenantSettings) int {
	rate := t.GetRunsPerSecond()
	if rate <= 0 {
		return 0
	}
	if b := t.GetRunsBurst(); b > 0 {
		return int(b)
	}
	return max(1, int(math.Ceil(rate)))
}
