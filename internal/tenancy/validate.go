package tenancy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dairuntime/dair/messages"
)

// ErrInvalidSettings is matched (errors.Is) by every *ValidationError returned by Validate.
var ErrInvalidSettings = errors.New("tenancy: invalid tenant settings")

// ValidateTenantID reports (as a *ValidationError of field tenant_id) an id no tenant can have.
func ValidateTenantID(id string) error {
	if !validTenantID(id) {
		return &ValidationError{Field: "tenant_id", Reason: fmt.Sprintf("%q does not match %s", id, tenantIDPattern)}
	}
	return nil
}

// TenantIDRule is the rule of a tenant id, as error messages name it.
const TenantIDRule = `^[a-z0-9][a-z0-9_-]{0,62}$`

// validTenantID is tenantIDPattern.MatchString without the regexp (agent sends check every
// message's tenant).
func validTenantID(id string) bool {
	if id == "" || len(id) > 63 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-')) {
			return false
		}
	}
	return true
}

// ValidationError reports the first field of a TenantSettings that breaks a rule.
type ValidationError struct {
	// Field is the snake_case settings field name, as in CONTRACT.md.
	Field string
	// Reason says which rule the field breaks.
	Reason string
}

// Error implements error.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("tenancy: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidSettings so callers can match any validation failure.
func (e *ValidationError) Unwrap() error { return ErrInvalidSettings }

var (
	tenantIDPattern = regexp.MustCompile(TenantIDRule)
	prefixPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// Ranges accepted by Validate (inclusive).
const (
	MaxMaxRuntimeInstances          = 1000
	MaxWorkerCountPerInstance       = 10000
	MaxMaxConcurrentRunsPerInstance = 100000
	MaxLocalQueueCapacity           = 1000000
	MaxWeight                       = 1000
	MaxMaxConcurrentRuns            = 1000000
	MaxMaxQueuedRuns                = 100000000
	MaxRunsPerSecond                = 1000000
)

// Validate checks t as given and returns a *ValidationError for the first broken rule, or nil.
// Call it on Normalize(t) to accept zero fields as defaults. Rules:
//
//   - tenant_id matches ^[a-z0-9][a-z0-9_-]{0,62}$; tenant_group_id, when set, too.
//   - isolation_mode is shared, dedicated or hybrid.
//   - runtime_instance_id_prefix matches ^[a-z0-9][a-z0-9-]{0,62}$.
//   - a dedicated or hybrid prefix neither equals DefaultPrefix nor starts with DefaultPrefix+"-"
//     (its scope would overlap the shared scope).
//   - a dedicated tenant does not allow shared fallback (use hybrid for that).
//   - max_runtime_instances is in 1..1000, worker_count_per_instance in 1..10000,
//     max_concurrent_runs_per_instance in 1..100000, local_queue_capacity in 0..1000000 and
//     max_local_workers_per_execution in 0..worker_count_per_instance (0 means no extra cap).
//   - weight is in 1..1000; max_concurrent_runs in 0..1000000, max_queued_runs in
//     0..100000000, runs_per_second in 0..1000000 and runs_burst in 0..1000000 (0: unlimited).
func Validate(t *messages.TenantSettings) error {
	if t == nil {
		return &ValidationError{Field: "settings", Reason: "missing"}
	}
	if err := ValidateTenantID(t.TenantId); err != nil {
		return err
	}
	if t.TenantGroupId != "" && !tenantIDPattern.MatchString(t.TenantGroupId) {
		return &ValidationError{Field: "tenant_group_id", Reason: fmt.Sprintf("%q does not match %s", t.TenantGroupId, tenantIDPattern)}
	}
	switch t.IsolationMode {
	case messages.IsolationShared, messages.IsolationDedicated, messages.IsolationHybrid:
	default:
		return &ValidationError{Field: "isolation_mode", Reason: fmt.Sprintf("%q is not shared, dedicated or hybrid", t.IsolationMode)}
	}
	p := t.RuntimeInstanceIdPrefix
	if !prefixPattern.MatchString(p) {
		return &ValidationError{Field: "runtime_instance_id_prefix", Reason: fmt.Sprintf("%q does not match %s", p, prefixPattern)}
	}
	if t.IsolationMode != messages.IsolationShared && (p == DefaultPrefix || strings.HasPrefix(p, DefaultPrefix+"-")) {
		return &ValidationError{Field: "runtime_instance_id_prefix", Reason: fmt.Sprintf("%s scope %q overlaps the shared scope %q", t.IsolationMode, p, DefaultPrefix)}
	}
	if t.IsolationMode == messages.IsolationDedicated && t.AllowSharedFallback {
		return &ValidationError{Field: "allow_shared_fallback", Reason: "dedicated tenants must not fall back to shared capacity; use hybrid"}
	}
	ranges := []struct {
		field    string
		v        int32
		min, max int32
	}{
		{"max_runtime_instances", t.MaxRuntimeInstances, 1, MaxMaxRuntimeInstances},
		{"worker_count_per_instance", t.WorkerCountPerInstance, 1, MaxWorkerCountPerInstance},
		{"max_concurrent_runs_per_instance", t.MaxConcurrentRunsPerInstance, 1, MaxMaxConcurrentRunsPerInstance},
		{"local_queue_capacity", t.LocalQueueCapacity, 0, MaxLocalQueueCapacity},
		{"max_local_workers_per_execution", t.MaxLocalWorkersPerExecution, 0, t.WorkerCountPerInstance},
		{"weight", t.Weight, 1, MaxWeight},
		{"max_concurrent_runs", t.MaxConcurrentRuns, 0, MaxMaxConcurrentRuns},
		{"max_queued_runs", t.MaxQueuedRuns, 0, MaxMaxQueuedRuns},
		{"runs_burst", t.RunsBurst, 0, MaxRunsPerSecond},
	}
	for _, r := range ranges {
		if r.v < r.min || r.v > r.max {
			return &ValidationError{Field: r.field, Reason: fmt.Sprintf("%d is outside %d..%d", r.v, r.min, r.max)}
		}
	}
	if rps := t.RunsPerSecond; !(rps >= 0 && rps <= MaxRunsPerSecond) { // also refuses NaN
		return &ValidationError{Field: "runs_per_second", Reason: fmt.Sprintf("%g is outside 0..%d", rps, MaxRunsPerSecond)}
	}
	if t.RunsBurst > 0 && t.RunsPerSecond == 0 {
		return &ValidationError{Field: "runs_burst", Reason: fmt.Sprintf("%d is the burst of a rate limit, and runs_per_second is 0 (no limit): set runs_per_second, or runs_burst 0", t.RunsBurst)}
	}
	return nil
}
