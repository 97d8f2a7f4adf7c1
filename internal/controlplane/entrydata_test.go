package controlplane

import (
	"encoding/json"
	"testing"
)

// TestEntryData_encodesAsTheMapsDid: the typed data of admission and dispatch entries encodes
// to the bytes of the maps it replaced (keys in name order, every key present), so readers of
// the ledger see the same JSON.
func TestEntryData_encodesAsTheMapsDid(t *testing.T) {
	for _, tc := range []struct {
		name      string
		typed, as any
	}{
		{"dispatch",
			dispatchData{LocalRunID: "lrun-1", Provider: "local", PumpRuntimeInstanceID: "p-1", Retryable: true},
			map[string]any{"provider": "local", "local_run_id": "lrun-1", "pump_runtime_instance_id": "p-1", "retryable": true}},
		{"dispatch, empty",
			dispatchData{},
			map[string]any{"provider": "", "local_run_id": "", "pump_runtime_instance_id": "", "retryable": false}},
		{"admission",
			admissionData{Decision: "assign", Fallback: true, Candidates: []admissionCandidate{{Eligible: true, Reason: "", RuntimeInstanceID: "i-1"},
				{Eligible: false, Reason: "full", RuntimeInstanceID: "i-2"}}},
			map[string]any{"decision": "assign", "fallback": true, "candidates": []map[string]any{
				{"runtime_instance_id": "i-1", "eligible": true, "reason": ""}, {"runtime_instance_id": "i-2", "eligible": false, "reason": "full"}}}},
		{"admission, no candidates",
			admissionData{Decision: "queue"},
			map[string]any{"decision": "queue", "fallback": false, "candidates": []map[string]any(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := jsonOrNil(tc.typed), jsonOrNil(tc.as)
			if string(got) != string(want) || got == nil {
				t.Fatalf("typed %s, map %s", got, want)
			}
			var back map[string]any
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
		})
	}
}
