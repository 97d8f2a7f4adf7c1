package tenancy

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

func TestDefaults_seedValues(t *testing.T) {
	d := Defaults("test-tenant")
	want := &messages.TenantSettings{
		TenantId: "test-tenant", IsolationMode: messages.IsolationShared, AllowSharedFallback: true,
		RuntimeInstanceIdPrefix: DefaultPrefix, MaxRuntimeInstances: 1, WorkerCountPerInstance: 10,
		MaxConcurrentRunsPerInstance: 3, LocalQueueCapacity: 100, MaxLocalWorkersPerExecution: 10, Weight: 1,
	}
	if !proto.Equal(d, want) {
		t.Fatalf("Defaults = %v, want %v", d, want)
	}
	if err := Validate(d); err != nil {
		t.Fatalf("Validate(Defaults) = %v", err)
	}
}

func TestSeedTenants_asListed(t *testing.T) {
	got := SeedTenants()
	tests := []struct {
		id, mode, prefix          string
		prefer, fallback          bool
		maxInst, workers, runs, q int32
	}{
		{"tenant-a", messages.IsolationDedicated, "tenant-a-runtime", true, false, 3, 10, 5, 500},
		{"tenant-b", messages.IsolationHybrid, "tenant-b-runtime", true, true, 2, 5, 3, 250},
		{"default", messages.IsolationShared, DefaultPrefix, false, true, 1, 10, 3, 100},
	}
	if len(got) != len(tests) {
		t.Fatalf("len = %d, want %d", len(got), len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			g := got[i]
			if g.TenantId != tt.id || g.IsolationMode != tt.mode || g.RuntimeInstanceIdPrefix != tt.prefix ||
				g.PreferDedicatedCapacity != tt.prefer || g.AllowSharedFallback != tt.fallback ||
				g.MaxRuntimeInstances != tt.maxInst || g.WorkerCountPerInstance != tt.workers ||
				g.MaxConcurrentRunsPerInstance != tt.runs || g.LocalQueueCapacity != tt.q {
				t.Fatalf("got %v", g)
			}
			if err := Validate(g); err != nil {
				t.Fatalf("Validate = %v", err)
			}
		})
	}
}

func TestNormalize_defaults(t *testing.T) {
	tests := []struct {
		name  string
		in    *messages.TenantSettings
		check func(*messages.TenantSettings) bool
	}{
		{"nil is defaults", nil, func(n *messages.TenantSettings) bool { return proto.Equal(n, Defaults("")) }},
		{"empty isolation is shared", &messages.TenantSettings{TenantId: "t"}, func(n *messages.TenantSettings) bool {
			return n.IsolationMode == messages.IsolationShared && n.RuntimeInstanceIdPrefix == DefaultPrefix
		}},
		{"weight zero is one, quotas stay unlimited", &messages.TenantSettings{TenantId: "t"}, func(n *messages.TenantSettings) bool {
			return n.Weight == 1 && n.MaxConcurrentRuns == 0 && n.MaxQueuedRuns == 0 && n.RunsPerSecond == 0 && n.RunsBurst == 0
		}},
		{"weight kept", &messages.TenantSettings{TenantId: "t", Weight: 3}, func(n *messages.TenantSettings) bool { return n.Weight == 3 }},
		{"isolation lowercased", &messages.TenantSettings{TenantId: "t", IsolationMode: " Dedicated "}, func(n *messages.TenantSettings) bool {
			return n.IsolationMode == messages.IsolationDedicated
		}},
		{"dedicated prefix from tenant id", &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationDedicated}, func(n *messages.TenantSettings) bool {
			return n.RuntimeInstanceIdPrefix == "acme-runtime"
		}},
		{"hybrid prefix from tenant id", &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationHybrid}, func(n *messages.TenantSettings) bool {
			return n.RuntimeInstanceIdPrefix == "acme-runtime"
		}},
		{"explicit prefix kept", &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationHybrid, RuntimeInstanceIdPrefix: "x"}, func(n *messages.TenantSettings) bool {
			return n.RuntimeInstanceIdPrefix == "x"
		}},
		{"zero counts filled", &messages.TenantSettings{TenantId: "t"}, func(n *messages.TenantSettings) bool {
			return n.MaxRuntimeInstances == 1 && n.WorkerCountPerInstance == 10 && n.MaxConcurrentRunsPerInstance == 3 &&
				n.LocalQueueCapacity == 100 && n.MaxLocalWorkersPerExecution == 10
		}},
		{"max local defaults to worker count", &messages.TenantSettings{TenantId: "t", WorkerCountPerInstance: 30}, func(n *messages.TenantSettings) bool {
			return n.MaxLocalWorkersPerExecution == 30
		}},
		{"set values kept", &messages.TenantSettings{TenantId: "t", WorkerCountPerInstance: 30, MaxLocalWorkersPerExecution: 4, MaxRuntimeInstances: 7}, func(n *messages.TenantSettings) bool {
			return n.MaxLocalWorkersPerExecution == 4 && n.MaxRuntimeInstances == 7 && n.WorkerCountPerInstance == 30
		}},
		{"negative kept for validation", &messages.TenantSettings{TenantId: "t", MaxRuntimeInstances: -1}, func(n *messages.TenantSettings) bool {
			return n.MaxRuntimeInstances == -1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *messages.TenantSettings
			if tt.in != nil {
				before = proto.Clone(tt.in).(*messages.TenantSettings)
			}
			n := Normalize(tt.in)
			if !tt.check(n) {
				t.Fatalf("Normalize(%v) = %v", tt.in, n)
			}
			if tt.in != nil && !proto.Equal(before, tt.in) {
				t.Fatalf("Normalize modified its input")
			}
		})
	}
}

func TestValidate_rules(t *testing.T) {
	valid := func(mut func(*messages.TenantSettings)) *messages.TenantSettings {
		s := Normalize(&messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationHybrid, AllowSharedFallback: true})
		mut(s)
		return s
	}
	tests := []struct {
		name  string
		in    *messages.TenantSettings
		field string // "" means valid
	}{
		{"valid hybrid", valid(func(*messages.TenantSettings) {}), ""},
		{"nil", nil, "settings"},
		{"empty tenant id", valid(func(s *messages.TenantSettings) { s.TenantId = "" }), "tenant_id"},
		{"uppercase tenant id", valid(func(s *messages.TenantSettings) { s.TenantId = "Acme" }), "tenant_id"},
		{"tenant id leading dash", valid(func(s *messages.TenantSettings) { s.TenantId = "-acme" }), "tenant_id"},
		{"tenant id underscore ok", valid(func(s *messages.TenantSettings) { s.TenantId = "acme_1" }), ""},
		{"tenant id 63 chars ok", valid(func(s *messages.TenantSettings) { s.TenantId = strings.Repeat("a", 63) }), ""},
		{"tenant id too long", valid(func(s *messages.TenantSettings) { s.TenantId = strings.Repeat("a", 64) }), "tenant_id"},
		{"bad group id", valid(func(s *messages.TenantSettings) { s.TenantGroupId = "Group!" }), "tenant_group_id"},
		{"unknown isolation", valid(func(s *messages.TenantSettings) { s.IsolationMode = "pooled" }), "isolation_mode"},
		{"bad prefix underscore", valid(func(s *messages.TenantSettings) { s.RuntimeInstanceIdPrefix = "acme_rt" }), "runtime_instance_id_prefix"},
		{"hybrid prefix equals default", valid(func(s *messages.TenantSettings) { s.RuntimeInstanceIdPrefix = DefaultPrefix }), "runtime_instance_id_prefix"},
		{"dedicated prefix under default", valid(func(s *messages.TenantSettings) {
			s.IsolationMode = messages.IsolationDedicated
			s.AllowSharedFallback = false
			s.RuntimeInstanceIdPrefix = DefaultPrefix + "-acme"
		}), "runtime_instance_id_prefix"},
		{"shared default prefix ok", valid(func(s *messages.TenantSettings) {
			s.IsolationMode = messages.IsolationShared
			s.RuntimeInstanceIdPrefix = DefaultPrefix
		}), ""},
		{"dedicated with fallback", valid(func(s *messages.TenantSettings) { s.IsolationMode = messages.IsolationDedicated }), "allow_shared_fallback"},
		{"max instances zero", valid(func(s *messages.TenantSettings) { s.MaxRuntimeInstances = 0 }), "max_runtime_instances"},
		{"max instances too high", valid(func(s *messages.TenantSettings) { s.MaxRuntimeInstances = 1001 }), "max_runtime_instances"},
		{"workers zero", valid(func(s *messages.TenantSettings) { s.WorkerCountPerInstance = 0 }), "worker_count_per_instance"},
		{"workers too high", valid(func(s *messages.TenantSettings) { s.WorkerCountPerInstance = 10001 }), "worker_count_per_instance"},
		{"runs zero", valid(func(s *messages.TenantSettings) { s.MaxConcurrentRunsPerInstance = 0 }), "max_concurrent_runs_per_instance"},
		{"runs too high", valid(func(s *messages.TenantSettings) { s.MaxConcurrentRunsPerInstance = 100001 }), "max_concurrent_runs_per_instance"},
		{"queue zero ok", valid(func(s *messages.TenantSettings) { s.LocalQueueCapacity = 0 }), ""},
		{"queue negative", valid(func(s *messages.TenantSettings) { s.LocalQueueCapacity = -1 }), "local_queue_capacity"},
		{"queue too high", valid(func(s *messages.TenantSettings) { s.LocalQueueCapacity = 1000001 }), "local_queue_capacity"},
		{"max local above workers", valid(func(s *messages.TenantSettings) { s.MaxLocalWorkersPerExecution = 11 }), "max_local_workers_per_execution"},
		{"max local negative", valid(func(s *messages.TenantSettings) { s.MaxLocalWorkersPerExecution = -1 }), "max_local_workers_per_execution"},
		{"weight zero", valid(func(s *messages.TenantSettings) { s.Weight = 0 }), "weight"},
		{"weight too high", valid(func(s *messages.TenantSettings) { s.Weight = 1001 }), "weight"},
		{"weight 1000 ok", valid(func(s *messages.TenantSettings) { s.Weight = 1000 }), ""},
		{"concurrency quota negative", valid(func(s *messages.TenantSettings) { s.MaxConcurrentRuns = -1 }), "max_concurrent_runs"},
		{"queued quota negative", valid(func(s *messages.TenantSettings) { s.MaxQueuedRuns = -1 }), "max_queued_runs"},
		{"rate negative", valid(func(s *messages.TenantSettings) { s.RunsPerSecond = -0.5 }), "runs_per_second"},
		{"rate NaN", valid(func(s *messages.TenantSettings) { s.RunsPerSecond = math.NaN() }), "runs_per_second"},
		{"rate fraction ok", valid(func(s *messages.TenantSettings) { s.RunsPerSecond = 0.5 }), ""},
		{"burst negative", valid(func(s *messages.TenantSettings) { s.RunsBurst = -1 }), "runs_burst"},
		{"burst without a rate", valid(func(s *messages.TenantSettings) { s.RunsBurst = 50 }), "runs_burst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.in)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want *ValidationError", err)
			}
			if ve.Field != tt.field {
				t.Fatalf("Field = %q (%v), want %q", ve.Field, err, tt.field)
			}
			if !errors.Is(err, ErrInvalidSettings) {
				t.Fatalf("errors.Is(%v, ErrInvalidSettings) = false", err)
			}
		})
	}
}

func TestBurst_default(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int32
		want  int
	}{
		{"no rate no bucket", 0, 5, 0},
		{"burst given", 10, 3, 3},
		{"burst from rate", 2.5, 0, 3},
		{"slow rate bursts one", 0.2, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Burst(&messages.TenantSettings{RunsPerSecond: tt.rate, RunsBurst: tt.burst}); got != tt.want {
				t.Fatalf("Burst = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestEffectiveWorkers_min(t *testing.T) {
	tests := []struct {
		name                     string
		workers, maxLocal, avail int
		want                     int
	}{
		{"seed example 30 workers max local 4", 30, 4, 30, 4},
		{"available is the limit", 30, 4, 2, 2},
		{"worker count is the limit", 3, 4, 10, 3},
		{"max local zero means no cap", 30, 0, 12, 12},
		{"no workers available", 30, 4, 0, 0},
		{"never negative", 30, 4, -3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectiveWorkers(tt.workers, tt.maxLocal, tt.avail); got != tt.want {
				t.Fatalf("EffectiveWorkers(%d,%d,%d) = %d, want %d", tt.workers, tt.maxLocal, tt.avail, got, tt.want)
			}
		})
	}
}

func TestCapacityFor_normalized(t *testing.T) {
	w, r, q, l := CapacityFor(&messages.TenantSettings{TenantId: "t", WorkerCountPerInstance: 30, MaxLocalWorkersPerExecution: 4})
	if w != 30 || r != 3 || q != 100 || l != 4 {
		t.Fatalf("CapacityFor = %d %d %d %d", w, r, q, l)
	}
}

func TestInstanceID_format(t *testing.T) {
	if got := InstanceID("tenant-a-runtime", 2); got != "tenant-a-runtime-2" {
		t.Fatalf("InstanceID = %q", got)
	}
}

func TestNextInstanceID_smallestFree(t *testing.T) {
	tests := []struct {
		name     string
		prefix   string
		existing []string
		wantN    int
	}{
		{"empty", "tenant-a-runtime", nil, 1},
		{"shared exists, dedicated starts at 1", "tenant-a-runtime", []string{"runtime-instance-1"}, 1},
		{"next after taken", DefaultPrefix, []string{"runtime-instance-1", "runtime-instance-2"}, 3},
		{"fills a gap", DefaultPrefix, []string{"runtime-instance-1", "runtime-instance-3"}, 2},
		{"ignores longer prefix", "tenant-a-runtime", []string{"tenant-a-runtime-x-1", "tenant-a-runtime-1"}, 2},
		{"ignores non-canonical ordinals", DefaultPrefix, []string{"runtime-instance-01", "runtime-instance-", "runtime-instance-1a"}, 1},
		{"other scopes do not count", "tenant-b-runtime", []string{"tenant-a-runtime-1", "runtime-instance-1"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, n := NextInstanceID(tt.prefix, tt.existing)
			if n != tt.wantN || id != InstanceID(tt.prefix, tt.wantN) {
				t.Fatalf("NextInstanceID = %q, %d; want n %d", id, n, tt.wantN)
			}
		})
	}
}
