package dag

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRenderWith(t *testing.T) {
	scope := Scope{
		Input: map[string]any{"name": "ada", "n": 3.0, "items": []any{"x", "y"}},
		Steps: map[string]any{
			"fetch":   map[string]any{"body": "hello", "status": 200.0},
			"my-step": json.RawMessage(`{"k":"v"}`),
		},
		TenantID:    "t1",
		ExecutionID: "e1",
	}
	tests := []struct {
		name    string
		with    map[string]any
		want    map[string]any
		wantErr string
	}{
		{
			name: "nil",
			with: nil,
			want: nil,
		},
		{
			name: "plain values untouched",
			with: map[string]any{"s": "no template", "n": 1.5, "b": true, "z": nil},
			want: map[string]any{"s": "no template", "n": 1.5, "b": true, "z": nil},
		},
		{
			name: "text around actions",
			with: map[string]any{"prompt": "Summarize: {{ .steps.fetch.output.body }} for {{ .input.name }}"},
			want: map[string]any{"prompt": "Summarize: hello for ada"},
		},
		{
			name: "ids and index for dashed step",
			with: map[string]any{"v": "{{ .tenant_id }}/{{ .execution_id }}/{{ index .steps \"my-step\" \"output\" \"k\" }}"},
			want: map[string]any{"v": "t1/e1/v"},
		},
		{
			name: "single action keeps raw map",
			with: map[string]any{"v": "{{ .steps.fetch.output }}"},
			want: map[string]any{"v": map[string]any{"body": "hello", "status": 200.0}},
		},
		{
			name: "single action keeps raw number",
			with: map[string]any{"v": "{{- .input.n -}}"},
			want: map[string]any{"v": 3.0},
		},
		{
			name: "single action pipeline",
			with: map[string]any{"v": `{{ .input.name | printf "%s!" }}`},
			want: map[string]any{"v": "ada!"},
		},
		{
			name: "json func",
			with: map[string]any{"v": "items={{ json .input.items }}"},
			want: map[string]any{"v": `items=["x","y"]`},
		},
		{
			name: "nested maps and slices",
			with: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi {{ .input.name }}"}}, "h": map[string]string{"x": "{{ .tenant_id }}"}, "l": []string{"{{ .execution_id }}"}},
			want: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi ada"}}, "h": map[string]any{"x": "t1"}, "l": []any{"e1"}},
		},
		{
			name: "index of missing key is nil",
			with: map[string]any{"v": `{{ index .input "nope" }}`},
			want: map[string]any{"v": nil},
		},
		{
			name:    "missing key is an error",
			with:    map[string]any{"v": "x {{ .input.nope }}"},
			wantErr: `with.v`,
		},
		{
			name:    "missing key in single action is an error",
			with:    map[string]any{"v": "{{ .steps.ghost.output }}"},
			wantErr: `map has no entry for key "ghost"`,
		},
		{
			name:    "syntax error",
			with:    map[string]any{"v": "{{ .input"},
			wantErr: "dag: render template: with.v",
		},
		{
			name:    "output too large",
			with:    map[string]any{"v": `{{ range .input.items }}{{ printf "%1048576s" "" }}{{ end }}`},
			wantErr: "size limit",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderWith(tt.with, scope)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrRender)
				require.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRenderWith_doesNotModifyInput(t *testing.T) {
	with := map[string]any{"a": []any{"{{ .tenant_id }}"}, "m": map[string]any{"b": "{{ .tenant_id }}"}}
	got, err := RenderWith(with, Scope{TenantID: "t"})
	require.NoError(t, err)
	require.Equal(t, "t", got["a"].([]any)[0])
	require.Equal(t, "{{ .tenant_id }}", with["a"].([]any)[0])
	require.Equal(t, "{{ .tenant_id }}", with["m"].(map[string]any)["b"])
}

func TestRenderWith_badRawInput(t *testing.T) {
	_, err := RenderWith(map[string]any{"v": "x"}, Scope{Input: json.RawMessage("{bad")})
	require.ErrorIs(t, err, ErrRender)
	require.True(t, strings.Contains(err.Error(), "decode input"), err.Error())
}

// A template that reads a missing field says which one, before text/template's words.
func TestRenderWith_missingFieldNamed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input any
		tmpl  string
		want  string
	}{
		{"no input", nil, "hello {{ .input.name }}", `.input.name: the value has no field "name"`},
		{"no such key", map[string]any{"x": 1}, "hello {{ .input.name }}", `.input.name: the value has no field "name"`},
		{"single action", map[string]any{"x": 1}, "{{ .input.name }}", `.input.name: the value has no field "name"`},
		{"not an object", []any{1}, "{{ .input.name }}", `.input.name: the value has no field "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderWith(map[string]any{"value": tc.tmpl}, Scope{Input: tc.input})
			if err == nil || !strings.Contains(err.Error(), "with.value: "+tc.want) || !errors.Is(err, ErrRender) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// With no input, index yields nothing (as with any object that lacks the key) and the input
// itself is still null.
func TestRenderWith_noInput(t *testing.T) {
	got, err := RenderWith(map[string]any{"i": `hello {{ index .input "name" }}`, "raw": "{{ .input }}", "j": "{{ json .input }}"}, Scope{})
	require.NoError(t, err)
	require.Equal(t, "hello <no value>", got["i"])
	require.Equal(t, "null", got["j"])
	b, err := json.Marshal(got["raw"])
	require.NoError(t, err)
	require.Equal(t, "null", string(b))
}
