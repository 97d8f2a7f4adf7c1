package actors

import "testing"

// TestSubmittedData_encodesAsTheMapDid: a "submitted" entry's typed data encodes to the bytes of
// the map it replaced.
func TestSubmittedData_encodesAsTheMapDid(t *testing.T) {
	got := jsonOrNil(submittedData{Pipeline: "p", PipelineHash: "h", RequestedBy: "u", Source: "api"})
	want := jsonOrNil(map[string]any{"pipeline": "p", "pipeline_hash": "h", "source": "api", "requested_by": "u"})
	if string(got) != string(want) {
		t.Fatalf("typed %s, map %s", got, want)
	}
}
