package lifecycle

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// ErrInvalidConfig is returned (wrapped) by Config.Validate for a negative setting.
var ErrInvalidConfig = errors.New("lifecycle: invalid config")

// Defaults of Config (seed 001).
const (
	DefaultIdleTimeout         = 60 * time.Minute
	DefaultIdleSweepInterval   = 5 * time.Minute
	DefaultColdStartWait       = 10 * time.Second
	DefaultColdStartRetries    = 1
	DefaultZeroRetention       = 7 * 24 * time.Hour
	DefaultWeeklySweepInterval = time.Hour
	DefaultTouchInterval       = time.Second
)

// SharedScopePrefix starts the scope key of shared capacity ("shared:<prefix>"); tenant ids
// cannot contain ':' so the keys never collide.
const SharedScopePrefix = "shared:"

// Config holds the lifecycle timings. The zero value of each field means its default.
type Config struct {
	// IdleTimeout is how long a scope may go without a request before it scales to zero.
	// Default 60m.
	IdleTimeout time.Duration
	// IdleSweepInterval is how often the idle sweep runs. Default 5m.
	IdleSweepInterval time.Duration
	// ColdStartWait bounds how long a request waits for capacity per cold-start attempt.
	// Default 10s.
	ColdStartWait time.Duration
	// ColdStartRetries is how many more attempts follow a failed first one. Default 1; a
	// negative value means no retry.
	ColdStartRetries int
	// ZeroRetention is how long an instance record stays at zero replicas before the weekly
	// sweep deletes it. Default 7 days.
	ZeroRetention time.Duration
	// WeeklySweepInterval is how often the weekly sweep runs (records expire by ZeroRetention,
	// so running it more often only deletes them closer to their expiry). Default 1h.
	WeeklySweepInterval time.Duration
	// TouchInterval throttles last-seen writes: at most one per scope per interval. Default 1s.
	TouchInterval time.Duration
}

// DefaultConfig returns the seed 001 timings.
func DefaultConfig() Config {
	return Config{IdleTimeout: DefaultIdleTimeout, IdleSweepInterval: DefaultIdleSweepInterval,
		ColdStartWait: DefaultColdStartWait, ColdStartRetries: DefaultColdStartRetries,
		ZeroRetention: DefaultZeroRetention, WeeklySweepInterval: DefaultWeeklySweepInterval,
		TouchInterval: DefaultTouchInterval}
}

// WithDefaults returns c with zero fields replaced by their defaults.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	def := func(v *time.Duration, dv time.Duration) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.IdleTimeout, d.IdleTimeout)
	def(&c.IdleSweepInterval, d.IdleSweepInterval)
	def(&c.ColdStartWait, d.ColdStartWait)
	def(&c.ZeroRetention, d.ZeroRetention)
	def(&c.WeeklySweepInterval, d.WeeklySweepInterval)
	def(&c.TouchInterval, d.TouchInterval)
	if c.ColdStartRetries == 0 {
		c.ColdStartRetries = d.ColdStartRetries
	}
	return c
}

// Validate reports a negative duration.
func (c Config) Validate() error {
	for name, v := range map[string]time.Duration{"idle timeout": c.IdleTimeout, "idle sweep interval": c.IdleSweepInterval,
		"cold start wait": c.ColdStartWait, "zero retention": c.ZeroRetention, "weekly sweep interval": c.WeeklySweepInterval,
		"touch interval": c.TouchInterval} {
		if v < 0 {
			return fmt.Errorf("%w: %s is negative (%s)", ErrInvalidConfig, name, v)
		}
	}
	return nil
}

// ColdStartAttempts returns how many times a cold start asks for capacity: 1 + retries.
func (c Config) ColdStartAttempts() int {
	return 1 + max(0, c.ColdStartRetries)
}

// ScopeKey names the lifecycle scope of a tenant: the tenant id for dedicated and hybrid
// isolation, SharedScopePrefix + runtime instance id prefix for shared tenants. t is normalized
// first.
func ScopeKey(t *messages.TenantSettings) string {
	n := tenancy.Normalize(t)
	if n.IsolationMode == messages.IsolationShared {
		return SharedScopePrefix + n.RuntimeInstanceIdPrefix
	}
	return n.TenantId
}

// Action is what a request to a scope must do before it is admitted.
type Action int

// Actions of Admit.
const (
	// Proceed admits the request as is.
	Proceed Action = iota
	// EnsureReady schedules the scope's capacity (first request) and admits without waiting.
	EnsureReady
	// ColdStart waits for capacity of a scope scaled to zero before admitting.
	ColdStart
	// Reject refuses the request: the tenant is suspended.
	Reject
)

// String returns the snake_case name of a.
func (a Action) String() string {
	switch a {
	case Proceed:
		return "proceed"
	case EnsureReady:
		return "ensure_ready"
	case ColdStart:
		return "cold_start"
	case Reject:
		return "reject"
	default:
		return "unknown"
	}
}

// Scope is what Admit decides on.
type Scope struct {
	// State is the scope's durable state; nil when the scope was never seen.
	State *messages.TenantState
	// Suspended is the tenant's suspension flag.
	Suspended bool
	// Live is the number of ready instances in the scope.
	Live int
}

// Admit decides what a request to s must do (rules 1 to 4 of the package doc).
func Admit(s Scope) Action {
	switch {
	case s.Suspended:
		return Reject
	case s.Live > 0:
		return Proceed
	case s.State.GetScaledToZeroAt() != 0:
		return ColdStart
	case s.State.GetEnsuredAt() == 0:
		return EnsureReady
	default:
		// Ensured and not scaled to zero, but nothing live yet: the capacity asked for by
		// EnsureReady (or admission's own scale-out) is still on its way.
		return Proceed
	}
}

// IdleSince returns the later of the scope's last request and its last EnsureReady; zero when
// the scope was never seen.
func IdleSince(s *messages.TenantState) time.Time {
	ns := max(s.GetLastSeenAt(), s.GetEnsuredAt())
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// ShouldScaleToZero reports whether a scope with state s has been idle for cfg.IdleTimeout at
// now (rule 5). A scope never seen has no lifecycle-managed capacity and never scales to zero.
// Callers stop only what ScaleIn(insts, 0) returns.
func ShouldScaleToZero(now time.Time, s *messages.TenantState, cfg Config) bool {
	since := IdleSince(s)
	if since.IsZero() {
		return false
	}
	return now.Sub(since) >= cfg.WithDefaults().IdleTimeout
}

// Idle reports whether an instance holds no queued or running run.
func Idle(d *messages.CapacityDescriptor) bool {
	return d.GetRunningRunCount() == 0 && d.GetQueuedRunCount() == 0 && d.GetActiveRunCount() == 0
}

// ScaleIn returns the ids of the instances of insts (one scope's live instances) to stop so at
// most maxInstances remain, choosing idle instances only, highest id first (the newest
// ordinal). Busy instances are never chosen, so fewer than needed may be returned; a later
// sweep re-checks. The caller owns the returned slice.
func ScaleIn(insts []*messages.CapacityDescriptor, maxInstances int) []string {
	excess := len(insts) - max(0, maxInstances)
	if excess <= 0 {
		return nil
	}
	idle := make([]*messages.CapacityDescriptor, 0, len(insts))
	for _, d := range insts {
		if Idle(d) {
			idle = append(idle, d)
		}
	}
	slices.SortFunc(idle, func(a, b *messages.CapacityDescriptor) int {
		if c := cmp.Compare(len(b.GetRuntimeInstanceId()), len(a.GetRuntimeInstanceId())); c != 0 {
			return c // "x-10" after "x-9": longer ids carry larger ordinals
		}
		return cmp.Compare(b.GetRuntimeInstanceId(), a.GetRuntimeInstanceId())
	})
	out := make([]string, 0, min(excess, len(idle)))
	for _, d := range idle[:min(excess, len(idle))] {
		out = append(out, d.GetRuntimeInstanceId())
	}
	return out
}

// Expired returns the ids of records at zero replicas since at least cfg.ZeroRetention before
// now (rule 6), in input order. Records with replicas > 0 or without ZeroSince are kept. The
// caller owns the returned slice.
func Expired(now time.Time, recs []*messages.InstanceRecord, cfg Config) []string {
	retention := cfg.WithDefaults().ZeroRetention
	var out []string
	for _, r := range recs {
		if r.GetReplicas() > 0 || r.GetZeroSince() == 0 {
			continue
		}
		if now.Sub(time.Unix(0, r.GetZeroSince())) >= retention {
			out = append(out, r.GetRuntimeInstanceId())
		}
	}
	return out
}

// TouchDue reports whether a last-seen update at now must be written, given the time of the
// last write (zero when none): at most one write per cfg.TouchInterval.
func TouchDue(lastWrite, now time.Time, cfg Config) bool {
	return lastWrite.IsZero() || now.Sub(lastWrite) >= cfg.WithDefaults().TouchInterval
}
