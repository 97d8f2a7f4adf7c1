package admission

import (
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
)

var now = time.Unix(1_700_000_000, 0)

// ready returns an eligible shared instance with a fresh heartbeat.
func ready(id string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{
		RuntimeInstanceId: id, Status: messages.InstanceReady, IsolationMode: messages.IsolationShared,
		WorkerCount: 10, AvailableWorkerCount: 10, MaxLocalWorkersPerExecution: 4,
		MaxConcurrentRuns: 3, AvailableRunSlots: 3, CanAcceptRun: true, QueueCapacity: 100,
		LastHeartbeatAt: now.Add(-time.Second).UnixNano(),
	}
}

func with(d *messages.CapacityDescriptor, mut func(*messages.CapacityDescriptor)) *messages.CapacityDescriptor {
	mut(d)
	return d
}

func TestEligible_conditions(t *testing.T) {
	tests := []struct {
		name     string
		inst     *messages.CapacityDescriptor
		reserved int
		now      time.Time
		timeout  time.Duration
		workers  int
		want     string
	}{
		{"all conditions hold", ready("i"), 0, now, 0, 1, ReasonEligible},
		{"roles empty counts as runtime", ready("i"), 0, now, 0, 0, ReasonEligible},
		{"roles include runtime", with(ready("i"), func(d *messages.CapacityDescriptor) { d.Roles = []string{"control-plane", "runtime"} }), 0, now, 0, 1, ReasonEligible},
		{"role is not runtime", with(ready("i"), func(d *messages.CapacityDescriptor) { d.Roles = []string{"control-plane"} }), 0, now, 0, 1, ReasonNotRuntimeRole},
		{"status starting", with(ready("i"), func(d *messages.CapacityDescriptor) { d.Status = messages.InstanceStarting }), 0, now, 0, 1, ReasonNotReady},
		{"status unhealthy", with(ready("i"), func(d *messages.CapacityDescriptor) { d.Status = messages.InstanceUnhealthy }), 0, now, 0, 1, ReasonNotReady},
		{"queue paused", with(ready("i"), func(d *messages.CapacityDescriptor) { d.IsQueuePaused = true }), 0, now, 0, 1, ReasonQueuePaused},
		{"draining flag", with(ready("i"), func(d *messages.CapacityDescriptor) { d.IsDraining = true }), 0, now, 0, 1, ReasonDraining},
		{"heartbeat stale at default timeout", with(ready("i"), func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = now.Add(-11 * time.Second).UnixNano() }), 0, now, 0, 1, ReasonStaleHeartbeat},
		{"heartbeat fresh within custom timeout", with(ready("i"), func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = now.Add(-11 * time.Second).UnixNano() }), 0, now, time.Minute, 1, ReasonEligible},
		{"heartbeat stale at custom timeout", with(ready("i"), func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = now.Add(-3 * time.Second).UnixNano() }), 0, now, 2 * time.Second, 1, ReasonStaleHeartbeat},
		{"never heartbeated", with(ready("i"), func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = 0 }), 0, now, 0, 1, ReasonStaleHeartbeat},
		{"zero now skips staleness", with(ready("i"), func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = 0 }), 0, time.Time{}, 0, 1, ReasonEligible},
		{"cannot accept run", with(ready("i"), func(d *messages.CapacityDescriptor) { d.CanAcceptRun = false }), 0, now, 0, 1, ReasonCannotAcceptRun},
		{"no available run slots", with(ready("i"), func(d *messages.CapacityDescriptor) { d.AvailableRunSlots = 0 }), 0, now, 0, 1, ReasonNoRunSlots},
		{"reservations use up slots", ready("i"), 3, now, 0, 1, ReasonNoRunSlots},
		{"reservations leave one slot", ready("i"), 2, now, 0, 1, ReasonEligible},
		{"no available workers", with(ready("i"), func(d *messages.CapacityDescriptor) { d.AvailableWorkerCount = 0 }), 0, now, 0, 1, ReasonNoAvailableWorkers},
		{"max local workers too small for shape", ready("i"), 0, now, 0, 5, ReasonMaxLocalWorkersLimit},
		{"max local workers fits shape", ready("i"), 0, now, 0, 4, ReasonEligible},
		{"max local zero means no cap", with(ready("i"), func(d *messages.CapacityDescriptor) { d.MaxLocalWorkersPerExecution = 0 }), 0, now, 0, 50, ReasonEligible},
		{"nil instance", nil, 0, now, 0, 1, ReasonNilInstance},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := Eligible(tt.inst, tt.reserved, tt.now, tt.timeout, tt.workers)
			if reason != tt.want || ok != (tt.want == ReasonEligible) {
				t.Fatalf("Eligible = %v, %q; want %q", ok, reason, tt.want)
			}
		})
	}
}

func TestEffectiveAvailableRunSlots_min(t *testing.T) {
	tests := []struct {
		name            string
		avail, max, res int32
		want            int
	}{
		{"published slots limit", 2, 5, 0, 2},
		{"reservations limit", 5, 5, 4, 1},
		{"over-reserved is zero", 5, 5, 9, 0},
		{"no max concurrent runs", 3, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &messages.CapacityDescriptor{AvailableRunSlots: tt.avail, MaxConcurrentRuns: tt.max}
			if got := EffectiveAvailableRunSlots(d, int(tt.res)); got != tt.want {
				t.Fatalf("EffectiveAvailableRunSlots = %d, want %d", got, tt.want)
			}
		})
	}
	if got := EffectiveAvailableRunSlots(nil, 0); got != 0 {
		t.Fatalf("nil = %d", got)
	}
}

func TestOrder_tiebreaks(t *testing.T) {
	tests := []struct {
		name     string
		a, b     *messages.CapacityDescriptor // a must sort first
		reserved map[string]int
	}{
		{"more effective slots first", with(ready("z"), func(d *messages.CapacityDescriptor) { d.AvailableRunSlots = 3 }), with(ready("a"), func(d *messages.CapacityDescriptor) { d.AvailableRunSlots = 2 }), nil},
		{"reservations lower effective slots", ready("z"), ready("a"), map[string]int{"a": 2}},
		{"more available workers first", with(ready("z"), func(d *messages.CapacityDescriptor) { d.AvailableWorkerCount = 9 }), with(ready("a"), func(d *messages.CapacityDescriptor) { d.AvailableWorkerCount = 8 }), nil},
		{"fewer running runs first", with(ready("z"), func(d *messages.CapacityDescriptor) { d.RunningRunCount = 0 }), with(ready("a"), func(d *messages.CapacityDescriptor) { d.RunningRunCount = 1 }), nil},
		{"fewer queued runs first", with(ready("z"), func(d *messages.CapacityDescriptor) { d.QueuedRunCount = 0 }), with(ready("a"), func(d *messages.CapacityDescriptor) { d.QueuedRunCount = 4 }), nil},
		{"newer heartbeat first", with(ready("z"), func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = now.UnixNano() }), ready("a"), nil},
		{"instance id ordinal", ready("runtime-instance-10"), ready("runtime-instance-9"), nil},
		{"uppercase before lowercase (ordinal)", ready("B"), ready("a"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, in := range [][]*messages.CapacityDescriptor{{tt.a, tt.b}, {tt.b, tt.a}, {nil, tt.b, tt.a}} {
				Order(in, tt.reserved)
				if in[0] != tt.a || in[1] != tt.b {
					t.Fatalf("Order = %s, %s; want %s first", in[0].GetRuntimeInstanceId(), in[1].GetRuntimeInstanceId(), tt.a.RuntimeInstanceId)
				}
			}
		})
	}
}
