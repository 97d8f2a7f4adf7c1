package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"text/template/parse"
)

// Scope is what `with` templates see.
type Scope struct {
	// Input is the run's input (a decoded JSON value; a json.RawMessage is decoded first).
	Input any
	// Steps maps a step id to its output (json.RawMessage outputs are decoded first).
	Steps map[string]any
	// TenantID and ExecutionID identify the run.
	TenantID, ExecutionID string
}

// MaxRenderedBytes bounds the text one template may produce.
const MaxRenderedBytes = 1 << 20

// rootFields are the names a template may use at its root.
var rootFields = map[string]bool{"input": true, "steps": true, "tenant_id": true, "execution_id": true}

// templateFuncs extend text/template's builtins; Validate and RenderWith use the same set.
var templateFuncs = template.FuncMap{
	// json encodes a value as compact JSON text.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("json: %w", err)
		}
		return string(b), nil
	},
}

// rawFunc is the internal function RenderWith appends to a single-action template to capture
// its value; users cannot call it because Validate does not know it.
const rawFunc = "dairRawValue"

func newTemplate(name string) *template.Template {
	return template.New(name).Funcs(templateFuncs).Option("missingkey=error")
}

// RenderWith renders every string value of with, recursively through maps and slices, as a
// text/template with the data
//
//	{"input": s.Input, "steps": {"<id>": {"output": ...}}, "tenant_id": ..., "execution_id": ...}
//
// so templates write {{ .input.x }}, {{ .steps.fetch.output.body }}, or
// {{ index .steps "my-step" "output" }} for ids with dashes. The option missingkey=error is set:
// a field of a map that is absent is an error (use index, which yields nil, for optional
// fields). A string that is exactly one action without text around it, such as
// "{{ .steps.a.output }}", keeps the action's raw value (a map, number, bool, ...) instead of
// its printed form. One template may render at most MaxRenderedBytes. Values other than
// strings are copied as they are; the result may share non-string values with s. Errors wrap
// ErrRender. with is not modified; RenderWith is safe for concurrent use.
func RenderWith(with map[string]any, s Scope) (map[string]any, error) {
	if with == nil {
		return nil, nil
	}
	data, err := s.data()
	if err != nil {
		return nil, err
	}
	out, err := renderValue(with, "with", data, &renderBudget{left: MaxRenderOps})
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: with: rendered to %T", ErrRender, out)
	}
	return m, nil
}

// data builds the template data of s.
func (s Scope) data() (map[string]any, error) {
	input, err := decodeRaw(s.Input)
	if err != nil {
		return nil, fmt.Errorf("%w: decode input: %w", ErrRender, err)
	}
	if input == nil {
		// No input is an empty object to templates: {{ index .input "name" }} yields nothing
		// (index of a nil interface is an error), {{ .input.name }} is a missing field, and
		// {{ json .input }} is still null.
		input = map[string]any(nil)
	}
	steps := make(map[string]any, len(s.Steps))
	for id, out := range s.Steps {
		v, err := decodeRaw(out)
		if err != nil {
			return nil, fmt.Errorf("%w: decode output of step %q: %w", ErrRender, id, err)
		}
		steps[id] = map[string]any{"output": v}
	}
	return map[string]any{"input": input, "steps": steps, "tenant_id": s.TenantID, "execution_id": s.ExecutionID}, nil
}

func decodeRaw(v any) (any, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v, nil
	}
	if len(raw) == 0 {
		return nil, nil
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("dag: decode json: %w", err)
	}
	return out, nil
}

func renderValue(v any, path string, data map[string]any, b *renderBudget) (any, error) {
	switch x := v.(type) {
	case string:
		return renderString(x, path, data, b)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderValue(e, path+"."+k, data, b)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, fmt.Sprintf("%s[%d]", path, i), data, b)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderString(e, path+"."+k, data, b)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderString(e, fmt.Sprintf("%s[%d]", path, i), data, b)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

func renderString(s, path string, data map[string]any, b *renderBudget) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	t, err := newTemplate(path).Funcs(b.funcs()).Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRender, path, err)
	}
	if pipe, ok := singleAction(t); ok {
		if v, ok, err := renderRaw(pipe, path, data, b); ok || err != nil {
			return v, err
		}
	}
	instrument(t)
	w := &limitedBuffer{limit: MaxRenderedBytes}
	if err := t.Execute(w, data); err != nil {
		return nil, execError(path, err)
	}
	return w.buf.String(), nil
}

// singleAction returns the pipeline of a template that is exactly one action that declares
// no variables.
func singleAction(t *template.Template) (*parse.PipeNode, bool) {
	if t.Tree == nil || t.Tree.Root == nil || len(t.Tree.Root.Nodes) != 1 {
		return nil, false
	}
	a, ok := t.Tree.Root.Nodes[0].(*parse.ActionNode)
	if !ok || a.Pipe == nil || len(a.Pipe.Decl) > 0 {
		return nil, false
	}
	return a.Pipe, true
}

// renderRaw evaluates pipe and returns its value. ok is false when the pipeline cannot be
// rewritten, and the caller renders text instead.
func renderRaw(pipe *parse.PipeNode, path string, data map[string]any, b *renderBudget) (v any, ok bool, err error) {
	var (
		captured any
		set      bool
	)
	capture := template.FuncMap{rawFunc: func(x any) string {
		captured, set = x, true
		return ""
	}}
	t, perr := newTemplate(path).Funcs(b.funcs()).Funcs(capture).Parse("{{ " + pipe.String() + " | " + rawFunc + " }}")
	if perr != nil {
		return nil, false, nil
	}
	w := &limitedBuffer{limit: MaxRenderedBytes}
	if err := t.Execute(w, data); err != nil {
		return nil, false, execError(path, err)
	}
	if !set {
		return nil, false, nil
	}
	return captured, true, nil
}

// errTooLong is returned by limitedBuffer past its limit.
var errTooLong = errors.New("dag: rendered text exceeds the size limit")

// limitedBuffer is a bytes.Buffer that refuses to grow past limit.
type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		return 0, fmt.Errorf("%w (%d bytes)", errTooLong, w.limit)
	}
	return w.buf.Write(p)
}

// missingField matches text/template's errors for a field that is not there: of a null value,
// of a map without the key (missingkey=error), of a value that is not a map.
var missingField = regexp.MustCompile(`at <(\.[^>]*)>: (?:nil pointer evaluating interface \{\}\.(\w+)|` +
	`map has no entry for key "([^"]*)"|can't evaluate field (\w+) in type)`)

// execError wraps a template execution error of the template at path. When a field is
// missing, the message starts with which one, in the pipeline's terms
// (`.input.name: the value has no field "name"`), before text/template's own words.
func execError(path string, err error) error {
	if budgetError(err) {
		return fmt.Errorf("%w: %s: %w", ErrRender, path, ErrRenderBudget)
	}
	m := missingField.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%w: %s: %w", ErrRender, path, err)
	}
	field := m[2] + m[3] + m[4]
	return fmt.Errorf("%w: %s: %s: the value has no field %q (input_schema checks inputs at submit): %w",
		ErrRender, path, m[1], field, err)
}
