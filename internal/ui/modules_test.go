package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/ui"
)

// TestTimeline_drawTimeline_recoveryAndRetries draws a trace with a crash (an open attempt, a
// recovery and a retry under a new epoch) and checks each shows.
func TestTimeline_drawTimeline_recoveryAndRetries(t *testing.T) {
	srv := httptest.NewServer(ui.Handler())
	t.Cleanup(srv.Close)
	p := openPage(t, srv.URL)
	spans := `[
	  {name: 'run r', kind: 'run', start: '2026-01-01T00:00:00.000Z', end: '2026-01-01T00:00:02.000Z', attributes: {status: 'run_succeeded'}},
	  {name: 'step a', kind: 'step', start: '2026-01-01T00:00:00.100Z', end: '2026-01-01T00:00:00.200Z', attributes: {step_id: 'a', attempt: 1, epoch: 1, status: 'succeeded', open: false}},
	  {name: 'step b', kind: 'step', start: '2026-01-01T00:00:00.200Z', end: '2026-01-01T00:00:01.000Z', attributes: {step_id: 'b', attempt: 1, epoch: 1, open: true}},
	  {name: 'step b', kind: 'step', start: '2026-01-01T00:00:01.300Z', end: '2026-01-01T00:00:01.900Z', attributes: {step_id: 'b', attempt: 2, epoch: 2, status: 'succeeded', open: false}},
	  {name: 'recovery', kind: 'event', start: '2026-01-01T00:00:01.200Z', end: '2026-01-01T00:00:01.200Z', attributes: {seq: 9, reason: 'instance lost'}},
	  {name: 'dispatch', kind: 'event', start: '2026-01-01T00:00:00.050Z', end: '2026-01-01T00:00:00.050Z', attributes: {seq: 3}},
	  {name: 'dispatch', kind: 'event', start: '2026-01-01T00:00:01.250Z', end: '2026-01-01T00:00:01.250Z', attributes: {seq: 10}}]`
	got, err := eval[string](p, `import('/ui/js/timeline.js').then((m) => {
		const box = document.createElement('div');
		document.body.append(box);
		m.drawTimeline(box, `+spans+`, {width: 1000});
		const q = (s) => box.querySelectorAll(s).length;
		return [q('.row-step'), q('.row-step[data-step="b"] .bar[data-status="open"]'), q('.row-step[data-step="b"][data-attempt="2"] .bar[data-status="succeeded"]'),
			q('.recovery-line'), q('.row-event[data-event="dispatch"] .marker'), q('.row-run .bar[data-status="succeeded"]')].join(',');
	})`)
	if err != nil {
		t.Fatal(err)
	}
	// 3 attempt rows; b's first attempt open; its retry succeeded; one recovery line; two
	// dispatch markers on one row; the run bar.
	if want := "3,1,1,1,2,1"; got != want {
		t.Errorf("counts = %s, want %s", got, want)
	}
	p.noExceptions()
}

// TestYAML_parsePipeline_matchesGo checks, in the browser, that the dashboard's small YAML
// reader (assets/js/yaml.js) finds the same steps, handlers and dependencies as the node's
// parser, for the example pipelines and for documents in less common YAML styles.
func TestYAML_parsePipeline_matchesGo(t *testing.T) {
	docs := map[string]string{
		"json": `{"key":"j","steps":[{"id":"a","uses":"echo","with":{"value":"x"}},{"id":"b","uses":"echo","needs":["a"]}]}`,
		"flow steps": `key: f
steps: [{id: a, uses: echo}, {id: "b", uses: 'echo', needs: [a]},
  {id: c, uses: sleep, needs: [a, b], with: {duration: 10ms}}]
`,
		"block needs, comments, block scalars": `# leading comment
key: blocky   # trailing comment
description: >
  folded text with a # hash
  and a second line
steps:
  -   id: first
      uses: echo
      with:
        value: |
          literal: text
          - not a list item
  - id: "second step"
    uses: echo
    needs:
      - first   # a comment
    with: {value: "a: b, c"}
  -
    id: third
    uses: echo
    needs: ["first", 'second step']
    retry:
      max_attempts: 2
      backoff: 10ms
`,
	}
	files, err := filepath.Glob("../../examples/pipelines/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("example pipelines: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(f)] = string(b)
	}

	srv := httptest.NewServer(ui.Handler())
	t.Cleanup(srv.Close)
	p := openPage(t, srv.URL)
	type step struct {
		ID    string   `json:"id"`
		Uses  string   `json:"uses"`
		Needs []string `json:"needs"`
	}
	for name, src := range docs {
		t.Run(name, func(t *testing.T) {
			pl, err := dag.Parse([]byte(src))
			if err != nil {
				t.Fatalf("the node cannot parse the case: %v", err)
			}
			want := make([]step, 0, len(pl.Steps))
			for _, s := range pl.Steps {
				needs := s.Needs
				if needs == nil {
					needs = []string{}
				}
				want = append(want, step{ID: s.ID, Uses: s.Uses, Needs: needs})
			}
			lit, err := json.Marshal(src)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := eval[string](p, fmt.Sprintf(`import('/ui/js/yaml.js').then((m) => JSON.stringify(m.parsePipeline(%s).steps))`, lit))
			if err != nil {
				t.Fatalf("parse in the browser: %v", err)
			}
			var got []step
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatalf("decode %s: %v", raw, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("browser steps = %+v\nnode steps    = %+v", got, want)
			}
		})
	}
	p.noExceptions()
}
