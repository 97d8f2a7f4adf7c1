package dag

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"text/template"
)

// TestRenderWith_budget: one row per way a template repeats work. Each row that exceeds
// MaxRenderOps fails with ErrRenderBudget inside ErrRender, as a count, the same on every
// render; the rows within it render.
func TestRenderWith_budget(t *testing.T) {
	list := make([]any, 500)
	for i := range list {
		list[i] = float64(i)
	}
	input := map[string]any{"list": list, "big": strings.Repeat("x", 64<<10), "deep": make([]any, 60)}
	for _, tc := range []struct {
		name string
		with map[string]any
		over bool
	}{
		{"three nested ranges over 500 items", map[string]any{"v": "{{range .input.list}}{{range $.input.list}}{{range $.input.list}}{{end}}{{end}}{{end}}"}, true},
		{"two nested ranges over 500 items", map[string]any{"v": "{{range .input.list}}{{range $.input.list}}{{end}}{{end}}"}, false},
		{"a range over an integer at the bound", map[string]any{"v": "{{range " + strconv.Itoa(MaxRenderOps-callOps) + "}}{{end}}"}, false},
		{"a range over an integer past the bound", map[string]any{"v": "{{range " + strconv.Itoa(MaxRenderOps-callOps+1) + "}}{{end}}"}, true},
		{"a range in an if and a with", map[string]any{"v": "{{if true}}{{with 1}}{{range 2000000000}}{{end}}{{end}}{{end}}"}, true},
		{"the budget is the step's, not each string's", map[string]any{
			"a": "{{range 150000}}{{end}}", "b": []any{"{{range 150000}}{{end}}"}}, true},
		{"recursive template calls without a range", map[string]any{
			"v": `{{define "t"}}{{if .}}{{template "t" (slice . 1)}}{{template "t" (slice . 1)}}{{end}}{{end}}{{template "t" .input.deep}}`}, true},
		{"printf of a large value in a loop, not written", map[string]any{"v": "{{range 20000}}{{$x := printf \"%s\" $.input.big}}{{end}}"}, true},
		{"json of a large value in a loop", map[string]any{"v": "{{range 20000}}{{$x := json $.input.big}}{{end}}"}, true},
		{"print in a single action", map[string]any{"v": "{{print .input.big}}"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderWith(tc.with, Scope{Input: input})
			if !tc.over {
				if err != nil {
					t.Fatalf("err = %v, want a render", err)
				}
				return
			}
			if !errors.Is(err, ErrRenderBudget) || !errors.Is(err, ErrRender) {
				t.Fatalf("err = %v, want ErrRenderBudget", err)
			}
			if strings.Contains(err.Error(), tickFunc) {
				t.Fatalf("err = %v names the internal function", err)
			}
		})
	}
}

// TestRenderWith_printFuncsAsBuiltins: the text functions that charge the budget give what
// text/template's own give.
func TestRenderWith_printFuncsAsBuiltins(t *testing.T) {
	for _, tmpl := range []string{
		`{{print 1 "a" 2.5 nil}}`, `{{printf "%d-%s-%v" 3 "x" .input}}`, `{{println 1 "b"}}`,
		`{{html "<a href='x'>&</a>"}}`, `{{js "it's \"q\" <b>"}}`, `{{urlquery "a b&c=d"}}`,
		`x{{print .input}}y`, `{{range .input.l}}{{printf "%v," .}}{{end}}`,
	} {
		data := map[string]any{"input": map[string]any{"k": "v", "l": []any{1.0, "two"}}}
		var want strings.Builder
		if err := template.Must(template.New("b").Parse(tmpl)).Execute(&want, data); err != nil {
			t.Fatal(err)
		}
		got, err := RenderWith(map[string]any{"v": tmpl}, Scope{Input: data["input"]})
		if err != nil {
			t.Fatalf("%s: %v", tmpl, err)
		}
		if got["v"] != want.String() {
			t.Fatalf("%s = %q, want %q", tmpl, got["v"], want.String())
		}
	}
}
