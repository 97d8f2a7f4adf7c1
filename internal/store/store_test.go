package store_test

import (
	"testing"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// TestDescriptorShape: one row per kind of publication, and whether it keeps the version a
// dispatch decision was taken on.
func TestDescriptorShape(t *testing.T) {
	base := func() *messages.CapacityDescriptor {
		return &messages.CapacityDescriptor{RuntimeInstanceId: "i1", Status: messages.InstanceReady, CanAcceptRun: true, MaxConcurrentRuns: 10,
			WorkerCount: 4, AvailableRunSlots: 10, AvailableWorkerCount: 4, LastHeartbeatAt: 1, TenantId: "acme",
			Metadata: map[string]string{"a": "1", "b": "2", "c": "3"}}
	}
	cases := []struct {
		name string
		edit func(d *messages.CapacityDescriptor)
		same bool
	}{
		{name: "republished unchanged", edit: func(*messages.CapacityDescriptor) {}, same: true},
		{name: "new heartbeat", edit: func(d *messages.CapacityDescriptor) { d.LastHeartbeatAt = 2 }, same: true},
		{name: "took a run: counts", edit: func(d *messages.CapacityDescriptor) {
			d.AvailableRunSlots, d.RunningRunCount, d.ActiveRunCount, d.QueuedRunCount = 9, 1, 2, 1
			d.AvailableWorkerCount, d.ActiveWorkerCount = 3, 1
		}, same: true},
		{name: "paused", edit: func(d *messages.CapacityDescriptor) { d.IsQueuePaused = true }},
		{name: "draining", edit: func(d *messages.CapacityDescriptor) { d.IsDraining, d.Status = true, messages.InstanceDraining }},
		{name: "full: cannot accept a run", edit: func(d *messages.CapacityDescriptor) { d.CanAcceptRun = false }, same: true},
		{name: "resized", edit: func(d *messages.CapacityDescriptor) { d.MaxConcurrentRuns = 20 }},
		{name: "another tenant", edit: func(d *messages.CapacityDescriptor) { d.TenantId = "other" }},
		{name: "metadata changed", edit: func(d *messages.CapacityDescriptor) { d.Metadata["b"] = "x" }},
	}
	want := store.DescriptorShape(base())
	if want == 0 {
		t.Fatal("version 0 (skips the check)")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := base()
			tc.edit(d)
			if got := store.DescriptorShape(d); (got == want) != tc.same {
				t.Fatalf("version %d, base %d: same = %v, want %v", got, want, got == want, tc.same)
			}
		})
	}
}

// TestRunFilter_indexes: which index a store may list a filter's runs from.
func TestRunFilter_indexes(t *testing.T) {
	parked, queued, done := messages.RunScaleOutRequested, messages.RunQueued, messages.RunSucceeded
	for _, tt := range []struct {
		name         string
		f            store.RunFilter
		live, parked bool
	}{
		{"no status: every run", store.RunFilter{}, false, false},
		{"a tenant only", store.RunFilter{TenantID: "t1"}, false, false},
		{"an active status", store.RunFilter{Status: queued}, true, false},
		{"a final status", store.RunFilter{Status: done}, false, false},
		{"active statuses", store.RunFilter{Statuses: []string{queued, parked}}, true, false},
		{"a final one among them", store.RunFilter{Statuses: []string{queued, done}}, false, false},
		{"parked", store.RunFilter{Status: parked}, true, true},
		{"parked, with a tenant", store.RunFilter{Status: parked, TenantID: "t1"}, true, true},
		{"parked in the list", store.RunFilter{Statuses: []string{parked}}, true, true},
		{"parked and parked", store.RunFilter{Status: parked, Statuses: []string{parked}}, true, true},
		{"parked, and another status", store.RunFilter{Status: queued, Statuses: []string{parked}}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.LiveOnly(); got != tt.live {
				t.Errorf("LiveOnly() = %v, want %v", got, tt.live)
			}
			if got := tt.f.ParkedOnly(); got != tt.parked {
				t.Errorf("ParkedOnly() = %v, want %v", got, tt.parked)
			}
		})
	}
}
