package tracetree

import (
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
)

func TestRender(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	spans := []httpapi.Span{
		{Name: "run r1", Kind: "run", Start: at(0), End: at(1204), Attributes: map[string]any{"status": "run_succeeded"}},
		{Name: "step fetch", Kind: "step", Start: at(5), End: at(107), Attributes: map[string]any{"attempt": 1.0,
			"status": "failed", "error": "boom\nagain", "runtime_instance_id": "ri-1", "open": false}},
		{Name: "step fetch", Kind: "step", Start: at(310), End: at(408), Attributes: map[string]any{"attempt": 2.0,
			"status": "succeeded", "open": false}},
		{Name: "step sum", Kind: "step", Start: at(410), End: at(1204), Attributes: map[string]any{"attempt": 1.0, "open": true}},
		{Name: "submitted", Kind: "event", Start: at(0), End: at(0), Attributes: map[string]any{}},
		{Name: "admission", Kind: "event", Start: at(1), End: at(1), Attributes: map[string]any{"runtime_instance_id": "ri-1",
			"reason": "most-available-slots"}},
	}
	var b strings.Builder
	if err := Render(&b, spans); err != nil {
		t.Fatal(err)
	}
	want := `run r1 run_succeeded 1.204s
├── +0s      submitted
├── +1ms     admission ri-1: most-available-slots
├── +5ms     step fetch 2 attempts, 403ms
│   ├── +5ms     attempt 1 failed 102ms on ri-1: boom again
│   └── +310ms   attempt 2 succeeded 98ms
└── +410ms   step sum 794ms
    └── +410ms   attempt 1 unfinished 794ms
`
	if b.String() != want {
		t.Fatalf("Render =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := Render(&b, nil); err != nil || b.String() != "(empty trace)\n" {
		t.Fatalf("empty = %q, %v", b.String(), err)
	}
}
