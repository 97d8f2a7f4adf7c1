package api

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/dairuntime/dair/messages"
)

// marshalEvent is what appendEvent must produce, written with encoding/json.
func marshalEvent(t testing.TB, e *messages.LedgerEntry) string {
	t.Helper()
	b, err := json.Marshal(ledgerEntryFromMessage(e))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", e.GetSeq(), e.GetKind(), b)
}

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name string
		e    *messages.LedgerEntry
	}{
		{"empty", &messages.LedgerEntry{}},
		{"every field", &messages.LedgerEntry{Seq: 42, At: 1764600000123456789, Kind: messages.KindStepSucceeded, SharedRunId: "run-1",
			TenantId: "acme", ExecutionId: "exec-1", RuntimeInstanceId: "rt-1", StepId: "s1", Attempt: 3, Epoch: 7, Reason: "why",
			Data: []byte(`{"duration_ms": 1, "b": [1, 2]}`)}},
		{"whole seconds", &messages.LedgerEntry{Seq: 1, At: 1764600000000000000, Kind: "k", SharedRunId: "r"}},
		{"negative numbers", &messages.LedgerEntry{Seq: -1, Attempt: -2, Epoch: -3}},
		{"quotes, backslashes and controls", &messages.LedgerEntry{Reason: "a\"b\\c\nd\re\tf\bg\fh\x00i\x1fj"}},
		{"html characters", &messages.LedgerEntry{Reason: "<script>&</script>", StepId: "a<b"}},
		{"line and paragraph separators", &messages.LedgerEntry{Reason: "x\u2028y\u2029z"}},
		{"invalid utf-8", &messages.LedgerEntry{Reason: "bad \xff\xfe byte", TenantId: "\xc3"}},
		{"multi-byte text", &messages.LedgerEntry{Reason: "héllo wörld ✓ 𝄞"}},
		{"data that is not JSON", &messages.LedgerEntry{Data: []byte("not json <&>")}},
		{"data with html in strings", &messages.LedgerEntry{Data: []byte(`{"a":"<b>&\u2028"}`)}},
		{"data with raw separators", &messages.LedgerEntry{Data: []byte("{\"a\":\"x\u2028y\"}")}},
		{"data with spaces to compact", &messages.LedgerEntry{Data: []byte(" [ 1 , { \"k\" : null } ] ")}},
		{"data that is a bare string", &messages.LedgerEntry{Data: []byte(`"s"`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := string(appendEvent(nil, tt.e)), marshalEvent(t, tt.e); got != want {
				t.Fatalf("appendEvent:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func FuzzAppendEvent(f *testing.F) {
	f.Add(int64(1), int64(1764600000123456789), "step_succeeded", "run", "tenant", "s1", "reason", []byte(`{"a":1}`), int32(1), int64(2))
	f.Add(int64(0), int64(0), "", "", "", "", "<\xff\u2028>", []byte("x"), int32(0), int64(0))
	f.Fuzz(func(t *testing.T, seq, at int64, kind, run, tenant, step, reason string, data []byte, attempt int32, epoch int64) {
		e := &messages.LedgerEntry{Seq: seq, At: at, Kind: kind, SharedRunId: run, TenantId: tenant, StepId: step, Reason: reason,
			Data: data, Attempt: attempt, Epoch: epoch}
		b, err := json.Marshal(ledgerEntryFromMessage(e))
		if err != nil {
			t.Skip("encoding/json refuses it too") // a time outside the years 0-9999
		}
		want := fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", seq, kind, b)
		if got := string(appendEvent(nil, e)); got != want {
			t.Fatalf("appendEvent:\n got %q\nwant %q", got, want)
		}
	})
}
