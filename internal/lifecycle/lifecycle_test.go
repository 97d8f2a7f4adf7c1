package lifecycle

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ns(t time.Time) int64 { return t.UnixNano() }

func TestAdmit_rules(t *testing.T) {
	tests := []struct {
		name  string
		scope Scope
		want  Action
	}{
		{"suspended_rejected", Scope{Suspended: true, Live: 2, State: &messages.TenantState{EnsuredAt: 1}}, Reject},
		{"suspended_at_zero_rejected", Scope{Suspended: true, State: &messages.TenantState{ScaledToZeroAt: 5}}, Reject},
		{"first_request_ensures", Scope{}, EnsureReady},
		{"state_without_ensure_ensures", Scope{State: &messages.TenantState{LastSeenAt: 3}}, EnsureReady},
		{"live_capacity_proceeds", Scope{Live: 1, State: &messages.TenantState{EnsuredAt: 1}}, Proceed},
		{"live_first_request_proceeds", Scope{Live: 1}, Proceed},
		{"at_zero_cold_starts", Scope{State: &messages.TenantState{EnsuredAt: 1, ScaledToZeroAt: 9}}, ColdStart},
		{"at_zero_but_live_proceeds", Scope{Live: 1, State: &messages.TenantState{EnsuredAt: 1, ScaledToZeroAt: 9}}, Proceed},
		{"ensured_capacity_pending_proceeds", Scope{State: &messages.TenantState{EnsuredAt: 1}}, Proceed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Admit(tc.scope); got != tc.want {
				t.Fatalf("Admit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShouldScaleToZero_idleTimeout(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		name  string
		state *messages.TenantState
		now   time.Time
		want  bool
	}{
		{"never_seen", nil, t0.Add(100 * time.Hour), false},
		{"seen_59m_ago", &messages.TenantState{LastSeenAt: ns(t0)}, t0.Add(59 * time.Minute), false},
		{"seen_60m_ago", &messages.TenantState{LastSeenAt: ns(t0)}, t0.Add(60 * time.Minute), true},
		{"seen_2h_ago", &messages.TenantState{LastSeenAt: ns(t0)}, t0.Add(2 * time.Hour), true},
		{"ensured_later_than_seen", &messages.TenantState{LastSeenAt: ns(t0), EnsuredAt: ns(t0.Add(30 * time.Minute))}, t0.Add(61 * time.Minute), false},
		{"ensured_only", &messages.TenantState{EnsuredAt: ns(t0)}, t0.Add(61 * time.Minute), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShouldScaleToZero(tc.now, tc.state, cfg); got != tc.want {
				t.Fatalf("ShouldScaleToZero = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShouldScaleToZero_configurable(t *testing.T) {
	st := &messages.TenantState{LastSeenAt: ns(t0)}
	if !ShouldScaleToZero(t0.Add(10*time.Second), st, Config{IdleTimeout: 10 * time.Second}) {
		t.Fatal("want scale to zero after a 10s idle timeout")
	}
}

func desc(id string, running, queued int32) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, RunningRunCount: running, QueuedRunCount: queued, ActiveRunCount: running + queued}
}

func TestScaleIn_idleOnly(t *testing.T) {
	tests := []struct {
		name  string
		insts []*messages.CapacityDescriptor
		max   int
		want  []string
	}{
		{"under_max", []*messages.CapacityDescriptor{desc("a-1", 0, 0)}, 2, nil},
		{"at_max", []*messages.CapacityDescriptor{desc("a-1", 0, 0), desc("a-2", 0, 0)}, 2, nil},
		{"newest_idle_first", []*messages.CapacityDescriptor{desc("a-1", 0, 0), desc("a-2", 0, 0), desc("a-3", 0, 0)}, 1, []string{"a-3", "a-2"}},
		{"ordinal_order", []*messages.CapacityDescriptor{desc("a-9", 0, 0), desc("a-10", 0, 0)}, 1, []string{"a-10"}},
		{"busy_running_kept", []*messages.CapacityDescriptor{desc("a-1", 0, 0), desc("a-2", 1, 0), desc("a-3", 0, 0)}, 1, []string{"a-3", "a-1"}},
		{"busy_queued_kept", []*messages.CapacityDescriptor{desc("a-1", 0, 2), desc("a-2", 0, 0)}, 0, []string{"a-2"}},
		{"all_busy", []*messages.CapacityDescriptor{desc("a-1", 1, 0), desc("a-2", 0, 1)}, 0, []string{}},
		{"to_zero", []*messages.CapacityDescriptor{desc("a-1", 0, 0), desc("a-2", 0, 0)}, 0, []string{"a-2", "a-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ScaleIn(tc.insts, tc.max)
			if len(got) != len(tc.want) || (len(got) > 0 && !slices.Equal(got, tc.want)) {
				t.Fatalf("ScaleIn = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExpired_weeklySweep(t *testing.T) {
	week := 7 * 24 * time.Hour
	now := t0.Add(30 * 24 * time.Hour)
	recs := []*messages.InstanceRecord{
		{RuntimeInstanceId: "up", Replicas: 1},
		{RuntimeInstanceId: "up-with-stale-zero", Replicas: 1, ZeroSince: ns(now.Add(-2 * week))},
		{RuntimeInstanceId: "zero-no-time", Replicas: 0},
		{RuntimeInstanceId: "zero-6d", Replicas: 0, ZeroSince: ns(now.Add(-6 * 24 * time.Hour))},
		{RuntimeInstanceId: "zero-7d", Replicas: 0, ZeroSince: ns(now.Add(-week))},
		{RuntimeInstanceId: "zero-8d", Replicas: 0, ZeroSince: ns(now.Add(-8 * 24 * time.Hour))},
	}
	got := Expired(now, recs, Config{})
	if want := []string{"zero-7d", "zero-8d"}; !slices.Equal(got, want) {
		t.Fatalf("Expired = %v, want %v", got, want)
	}
}

func TestTouchDue_throttle(t *testing.T) {
	tests := []struct {
		name      string
		lastWrite time.Time
		now       time.Time
		want      bool
	}{
		{"never_written", time.Time{}, t0, true},
		{"within_second", t0, t0.Add(999 * time.Millisecond), false},
		{"after_second", t0, t0.Add(time.Second), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TouchDue(tc.lastWrite, tc.now, Config{}); got != tc.want {
				t.Fatalf("TouchDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConfig_WithDefaults_zeroMeansDefault(t *testing.T) {
	got := Config{}.WithDefaults()
	if got != DefaultConfig() {
		t.Fatalf("WithDefaults = %+v, want %+v", got, DefaultConfig())
	}
	if n := got.ColdStartAttempts(); n != 2 {
		t.Fatalf("ColdStartAttempts = %d, want 2 (one retry)", n)
	}
	if n := (Config{ColdStartRetries: -1}).WithDefaults().ColdStartAttempts(); n != 1 {
		t.Fatalf("ColdStartAttempts without retry = %d, want 1", n)
	}
}

func TestConfig_Validate_negative(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("Validate(default) = %v", err)
	}
	if err := (Config{IdleTimeout: -time.Second}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
	}
}

func TestScopeKey_isolation(t *testing.T) {
	tests := []struct {
		name string
		t    *messages.TenantSettings
		want string
	}{
		{"shared_default_prefix", &messages.TenantSettings{TenantId: "a"}, "shared:runtime-instance"},
		{"dedicated_tenant", &messages.TenantSettings{TenantId: "a", IsolationMode: messages.IsolationDedicated}, "a"},
		{"hybrid_tenant", &messages.TenantSettings{TenantId: "b", IsolationMode: messages.IsolationHybrid}, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScopeKey(tc.t); got != tc.want {
				t.Fatalf("ScopeKey = %q, want %q", got, tc.want)
			}
		})
	}
}
