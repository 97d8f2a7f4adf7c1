package controlplane_test

import (
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/messages"
)

func TestCircuits_Record_opensAfterConsecutiveRetryableFailures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fail := &messages.ProviderResult{Ok: false, Retryable: true, Reason: "dispatch-timeout"}
	permanent := &messages.ProviderResult{Ok: false, Retryable: false, Reason: "tenant-not-visible"}
	ok := &messages.ProviderResult{Ok: true}
	tests := []struct {
		name     string
		results  []*messages.ProviderResult
		wantOpen bool
	}{
		{"no failures", nil, false},
		{"two failures stay closed", []*messages.ProviderResult{fail, fail}, false},
		{"three failures open", []*messages.ProviderResult{fail, fail, fail}, true},
		{"a success resets the count", []*messages.ProviderResult{fail, fail, ok, fail, fail}, false},
		{"non-retryable failures do not count", []*messages.ProviderResult{permanent, permanent, permanent}, false},
		{"a success closes an open circuit", []*messages.ProviderResult{fail, fail, fail, ok}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := controlplane.NewCircuits()
			for _, r := range tc.results {
				c.Record("i1", r, t0)
			}
			if got := c.IsOpen("i1", t0); got != tc.wantOpen {
				t.Fatalf("IsOpen = %v, want %v", got, tc.wantOpen)
			}
		})
	}
}

func TestCircuits_IsOpen_halfOpensAfterCoolDown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := controlplane.NewCircuits()
	fail := &messages.ProviderResult{Retryable: true}
	for i := 0; i < controlplane.CircuitFailures; i++ {
		c.Record("i1", fail, t0)
	}
	if !c.IsOpen("i1", t0.Add(controlplane.CircuitOpenFor-time.Second)) {
		t.Fatal("circuit closed before its cool-down")
	}
	if c.IsOpen("i1", t0.Add(controlplane.CircuitOpenFor+time.Second)) {
		t.Fatal("circuit still open after its cool-down")
	}
	// Half-open: one more failure opens it again at once.
	if !c.Record("i1", fail, t0.Add(controlplane.CircuitOpenFor+2*time.Second)) {
		t.Fatal("a failure while half-open did not reopen the circuit")
	}
}

func TestCircuits_Overlay_marksOpenInstancesUnhealthyWithoutMutating(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := controlplane.NewCircuits()
	for i := 0; i < controlplane.CircuitFailures; i++ {
		c.Record("b", &messages.ProviderResult{Retryable: true}, t0)
	}
	in := []*messages.CapacityDescriptor{
		{RuntimeInstanceId: "a", Status: messages.InstanceReady, CanAcceptRun: true},
		{RuntimeInstanceId: "b", Status: messages.InstanceReady, CanAcceptRun: true},
	}
	out := c.Overlay(in, t0)
	if out[1].Status != messages.InstanceUnhealthy || out[1].CanAcceptRun {
		t.Fatalf("open instance not marked: %v", out[1])
	}
	if in[1].Status != messages.InstanceReady || !in[1].CanAcceptRun {
		t.Fatal("overlay modified its input")
	}
	if out[0] != in[0] {
		t.Fatal("healthy instance was copied needlessly")
	}
}

// TestCircuits_Overlay_replacementUnderTheSameIDStartsClosed: the circuit of a lost host's
// registration stays open, but a replacement host that reuses the instance id (new member, new
// endpoint) gets work at once.
func TestCircuits_Overlay_replacementUnderTheSameIDStartsClosed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := controlplane.NewCircuits()
	lost := &messages.CapacityDescriptor{RuntimeInstanceId: "solo-runtime-1", NodeId: "m1", Endpoint: "grpc://127.0.0.1:4001",
		Status: messages.InstanceReady, CanAcceptRun: true}
	for i := 0; i < controlplane.CircuitFailures; i++ {
		c.Record(controlplane.CircuitKey(lost), &messages.ProviderResult{Retryable: true}, t0)
	}
	replacement := &messages.CapacityDescriptor{RuntimeInstanceId: "solo-runtime-1", NodeId: "m2", Endpoint: "grpc://127.0.0.1:4002",
		Status: messages.InstanceReady, CanAcceptRun: true}
	out := c.Overlay([]*messages.CapacityDescriptor{lost, replacement}, t0)
	if out[0].Status != messages.InstanceUnhealthy {
		t.Fatalf("the lost registration's circuit is not open: %v", out[0])
	}
	if out[1].Status != messages.InstanceReady || !out[1].CanAcceptRun {
		t.Fatalf("the replacement inherited the lost host's open circuit: %v", out[1])
	}
}

func TestMemberOverlay(t *testing.T) {
	members := []string{"m1", "m2"} // live member ids; their node ids are n1 and n2
	tests := []struct {
		name      string
		nodeID    string
		unhealthy bool
	}{
		{"published by a live member", "m1", false},
		{"published by a lost member", "m-old", true},
		{"logical node id is not a member id", "n1", true},
		{"no publisher recorded", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []*messages.CapacityDescriptor{{RuntimeInstanceId: "a", NodeId: tt.nodeID, Status: messages.InstanceReady, CanAcceptRun: true}}
			out := controlplane.MemberOverlay(in, members)
			if got := out[0].Status == messages.InstanceUnhealthy && !out[0].CanAcceptRun; got != tt.unhealthy {
				t.Fatalf("unhealthy = %v, want %v (%v)", got, tt.unhealthy, out[0])
			}
			if in[0].Status != messages.InstanceReady {
				t.Fatal("MemberOverlay modified its input")
			}
		})
	}
}
