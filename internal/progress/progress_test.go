package progress

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

func entry(t *testing.T, kind, step string, at time.Time, data string) []byte {
	t.Helper()
	e := httpapi.LedgerEntry{Kind: kind, StepID: step, At: at, Attempt: 1, Reason: "boom"}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

func TestPrinter_Event_lines(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		total int
		live  bool
		want  []string // substrings in order
		avoid string
	}{
		{"plain with total", 2, false, []string{"[1/2] step a succeeded 102ms", "step b failed 1s (attempt 1, retrying in 200ms): boom",
			"[2/2] step b failed 1.5s boom", "run r1 failed: 1/2 steps succeeded"}, "\033"},
		{"plain without total", 0, false, []string{"[1] step a succeeded", "[2] step b failed"}, "\033"},
		{"live status line", 2, true, []string{"running 1: a", "\r\033[K[1/2] step a succeeded"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			p := New(&out, tc.total, tc.live)
			for _, ev := range []struct {
				kind, step string
				at         time.Duration
				data       string
			}{
				{messages.KindStepStarted, "a", 0, ""},
				{messages.KindStepSucceeded, "a", 102 * time.Millisecond, ""},
				{messages.KindStepStarted, "b", 0, ""},
				{messages.KindStepFailed, "b", time.Second, `{"final":false,"retry_in_ms":200}`},
				{messages.KindStepFailed, "b", 1500 * time.Millisecond, `{"final":true}`},
				{"not json kind", "", 0, ""},
			} {
				require.NoError(t, p.Event(0, ev.kind, entry(t, ev.kind, ev.step, t0.Add(ev.at), ev.data)))
			}
			require.NoError(t, p.Event(0, "garbage", []byte("{")))
			require.NoError(t, p.Summary(&httpapi.Run{SharedRunID: "r1", Status: messages.RunFailed,
				Steps: []httpapi.Step{{ID: "a", Status: messages.StepSucceeded}, {ID: "b", Status: messages.StepFailed}}}))
			s := out.String()
			pos := 0
			for _, w := range tc.want {
				i := strings.Index(s[pos:], w)
				require.GreaterOrEqual(t, i, 0, "missing %q after %d in %q", w, pos, s)
				pos += i + len(w)
			}
			if tc.avoid != "" {
				require.NotContains(t, s, tc.avoid)
			}
		})
	}
}
