package dag

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func knownHandlers(name string) bool {
	switch name {
	case "echo", "http", "llm.chat", "sleep", "fail":
		return true
	}
	return false
}

const validYAML = `
key: summarize-report
description: fetch then summarize
steps:
  - id: fetch
    uses: http
    with: {method: GET, url: "http://127.0.0.1:9000/doc"}
    retry: {max_attempts: 3, backoff: 200ms, max_backoff: 2s}
    timeout: 10s
  - id: summarize
    uses: llm.chat
    needs: [fetch]
    with: {model: "m", prompt: "Summarize: {{ .steps.fetch.output.body }}"}
`

func TestLoad_valid(t *testing.T) {
	p, err := Load([]byte(validYAML), knownHandlers)
	require.NoError(t, err)
	require.Equal(t, "summarize-report", p.Key)
	require.Equal(t, "fetch then summarize", p.Description)
	require.Len(t, p.Steps, 2)
	fetch, ok := p.Step("fetch")
	require.True(t, ok)
	require.Equal(t, 3, fetch.Retry.MaxAttempts)
	require.Equal(t, "200ms", fetch.Retry.Backoff.String())
	require.Equal(t, "2s", fetch.Retry.MaxBackoff.String())
	require.Equal(t, "10s", fetch.Timeout.String())
	require.Equal(t, "GET", fetch.With["method"])
	require.Len(t, p.Hash, 64)
	require.Equal(t, validYAML, string(p.Source))
	_, ok = p.Step("nope")
	require.False(t, ok)
}

// TestLoad_Validate_rules has one row per rule.
func TestLoad_Validate_rules(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		kind    ErrorKind // "" => *ParseError
		step    string
		message string // substring of Error()
	}{
		{
			name: "cycle path reported",
			doc: `{"key":"k","steps":[
				{"id":"c","uses":"echo","needs":["b"]},
				{"id":"a","uses":"echo","needs":["c"]},
				{"id":"b","uses":"echo","needs":["a"]},
				{"id":"z","uses":"echo"}]}`,
			kind:    KindCycle,
			step:    "a",
			message: "dag: cycle: a -> c -> b -> a",
		},
		{
			name:    "two step cycle",
			doc:     "key: k\nsteps:\n  - {id: x, uses: echo, needs: [y]}\n  - {id: y, uses: echo, needs: [x]}\n",
			kind:    KindCycle,
			message: "dag: cycle: x -> y -> x",
			step:    "x",
		},
		{
			name:    "duplicate id",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: a, uses: echo}\n",
			kind:    KindDuplicateID,
			step:    "a",
			message: `dag: step "a": duplicate_id: id: id is used by more than one step`,
		},
		{
			name:    "unknown handler",
			doc:     "key: k\nsteps:\n  - {id: a, uses: nope}\n",
			kind:    KindUnknownHandler,
			step:    "a",
			message: `no handler registered as "nope"`,
		},
		{
			name:    "unknown dependency",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, needs: [ghost]}\n",
			kind:    KindUnknownDependency,
			step:    "a",
			message: `no step with id "ghost"`,
		},
		{
			name:    "self dependency",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, needs: [a]}\n",
			kind:    KindSelfDependency,
			step:    "a",
			message: "step needs itself",
		},
		{
			name:    "bad template syntax",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, with: {value: \"{{ .input \"}}\n",
			kind:    KindBadTemplate,
			step:    "a",
			message: "with.value",
		},
		{
			name:    "template references step outside needs",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo, with: {value: \"{{ .steps.a.output }}\"}}\n",
			kind:    KindBadTemplate,
			step:    "b",
			message: `step "a", which is not in the step's needs`,
		},
		{
			name:    "template references unknown step via index",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, with: {value: '{{ index .steps \"my-step\" \"output\" }}'}}\n",
			kind:    KindBadTemplate,
			step:    "a",
			message: `unknown step "my-step"`,
		},
		{
			name:    "template references unknown root field",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, with: {value: '{{ .inputs.x }}'}}\n",
			kind:    KindBadTemplate,
			message: "unknown field .inputs",
		},
		{
			name:    "template references non-output field",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo, needs: [a], with: {v: ['{{ $.steps.a.result }}']}}\n",
			kind:    KindBadTemplate,
			message: "with.v[0]",
		},
		{
			name:    "template ranges over a number",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, with: {v: '{{ range 100000000 }}x{{ end }}'}}\n",
			kind:    KindBadTemplate,
			message: "range over a number literal",
		},
		{
			name:    "empty id",
			doc:     "key: k\nsteps:\n  - {uses: echo}\n",
			kind:    KindEmptyID,
			message: "step #1 has no id",
		},
		{
			name: "bad id",
			doc:  "key: k\nsteps:\n  - {id: 'a b', uses: echo}\n",
			kind: KindBadID,
			step: "a b",
		},
		{
			name:    "missing uses",
			doc:     "key: k\nsteps:\n  - {id: a}\n",
			kind:    KindMissingUses,
			step:    "a",
			message: `dag: step "a": missing_uses: uses: step has no handler`,
		},
		{
			name: "no steps",
			doc:  "key: k\nsteps: []\n",
			kind: KindNoSteps,
		},
		{
			name: "missing key",
			doc:  "steps:\n  - {id: a, uses: echo}\n",
			kind: KindMissingKey,
		},
		{
			name:    "bad key",
			doc:     "key: Bad_Key\nsteps:\n  - {id: a, uses: echo}\n",
			kind:    KindBadKey,
			message: `key "Bad_Key" must match`,
		},
		{
			name:    "negative max attempts",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, retry: {max_attempts: -1}}\n",
			kind:    KindBadRetry,
			message: "retry.max_attempts",
		},
		{
			name:    "unparseable backoff",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, retry: {backoff: soon}}\n",
			kind:    KindBadRetry,
			message: "retry.backoff",
		},
		{
			name:    "max backoff below backoff",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, retry: {backoff: 2s, max_backoff: 1s}}\n",
			kind:    KindBadRetry,
			message: "max_backoff 1s is less than backoff 2s",
		},
		{
			name:    "numeric timeout",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, timeout: 10}\n",
			kind:    KindBadTimeout,
			message: "want a duration string",
		},
		{
			name:    "negative timeout",
			doc:     `{"key":"k","steps":[{"id":"a","uses":"echo","timeout":"-1s"}]}`,
			kind:    KindBadTimeout,
			message: "negative timeout -1s",
		},
		{
			name:    "non-finite number in with",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, with: {n: .inf}}\n",
			kind:    KindBadWith,
			message: "with.n",
		},
		{
			name:    "malformed YAML",
			doc:     "key: k\nsteps:\n  - id: a\n   uses: echo\n",
			message: "dag: parse yaml: line 2: did not find expected",
		},
		{
			name:    "malformed JSON",
			doc:     "{\"key\": \"k\",\n \"steps\": [\n}",
			message: "dag: parse json: line 3:",
		},
		{
			name:    "unknown field YAML",
			doc:     "key: k\nsteps:\n  - {id: a, uses: echo, colour: red}\n",
			message: `line 3: unknown field "colour"`,
		},
		{
			name:    "unknown field JSON",
			doc:     `{"key":"k","steps":[{"id":"a","uses":"echo"}],"extra":1}`,
			message: `dag: parse json: unknown field "extra"`,
		},
		{
			name:    "a JSON field spelled in another case",
			doc:     `{"key":"k","steps":[{"id":"a","uses":"echo","USES":"fail"}]}`,
			message: `dag: parse json: unknown field "USES" (at steps[0].USES): field names are case-sensitive; the field is "uses"`,
		},
		{
			name:    "wrong type",
			doc:     "key: k\nsteps: {id: a}\n",
			message: "dag: parse yaml: line 2:",
		},
		{
			name:    "trailing JSON",
			doc:     `{"key":"k","steps":[{"id":"a","uses":"echo"}]} {}`,
			message: "unexpected data after the pipeline object",
		},
		{
			name:    "two YAML documents",
			doc:     "key: k\nsteps: [{id: a, uses: echo}]\n---\nkey: j\n",
			message: "line 3: more than one document",
		},
		{
			name:    "empty document",
			doc:     "  \n",
			message: "dag: parse yaml: empty document",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load([]byte(tt.doc), knownHandlers)
			require.Error(t, err)
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrInvalid)
			if tt.message != "" {
				require.Contains(t, err.Error(), tt.message)
			}
			if tt.kind == "" {
				var pe *ParseError
				require.True(t, errors.As(err, &pe), "want *ParseError, got %T: %v", err, err)
				return
			}
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "want *ValidationError, got %T: %v", err, err)
			require.Equal(t, tt.kind, ve.Kind, ve.Error())
			require.Equal(t, tt.kind.String(), string(ve.Kind))
			if tt.step != "" {
				require.Equal(t, tt.step, ve.StepID)
			}
			if tt.kind == KindCycle {
				require.Equal(t, strings.TrimPrefix(tt.message, "dag: cycle: "), strings.Join(ve.Path, " -> "))
			}
		})
	}
}

func TestValidate_validTemplates(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{"transitive need", "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo, needs: [a]}\n  - {id: c, uses: echo, needs: [b], with: {v: '{{ .steps.a.output }}'}}\n"},
		{"index with dash", "key: k\nsteps:\n  - {id: my-step, uses: echo}\n  - {id: b, uses: echo, needs: [my-step], with: {v: '{{ index .steps \"my-step\" \"output\" }}'}}\n"},
		{"range body dot not checked", "key: k\nsteps:\n  - {id: a, uses: echo, with: {v: '{{ range .input.items }}{{ .name }}{{ end }}'}}\n"},
		{"root fields", "key: k\nsteps:\n  - {id: a, uses: echo, with: {v: '{{ .tenant_id }}/{{ .execution_id }}/{{ json .input }}'}}\n"},
		{"no template", "key: k\nsteps:\n  - {id: a, uses: echo, with: {v: 'plain {text}', n: 3, nested: {list: [1, 'x']}}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.doc), knownHandlers)
			require.NoError(t, err)
		})
	}
}

func TestValidate_goPipeline(t *testing.T) {
	tests := []struct {
		name string
		p    *Pipeline
		kind ErrorKind
	}{
		{"nil", nil, KindNoSteps},
		{"valid", &Pipeline{Key: "k", Steps: []Step{{ID: "a", Uses: "echo", With: map[string]any{"n": 3, "m": map[string]string{"x": "y"}}}}}, ""},
		{"unencodable with", &Pipeline{Key: "k", Steps: []Step{{ID: "a", Uses: "echo", With: map[string]any{"f": func() {}}}}}, KindBadWith},
		{"nil handler check skipped", &Pipeline{Key: "k", Steps: []Step{{ID: "a", Uses: "anything"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.p, nil)
			if tt.kind == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.kind, ve.Kind)
		})
	}
}

// A duration of the number 0 is zero, as "0s" is, in YAML and JSON; other numbers are refused
// (TestLoad_Validate_rules).
func TestLoad_zeroDurationNumber(t *testing.T) {
	for _, doc := range []string{
		"key: k\nsteps:\n  - {id: a, uses: echo, timeout: 0, retry: {backoff: 0, max_backoff: 0}}\n",
		`{"key":"k","steps":[{"id":"a","uses":"echo","timeout":0,"retry":{"backoff":0}}]}`,
	} {
		p, err := Load([]byte(doc), knownHandlers)
		require.NoError(t, err, doc)
		require.Zero(t, p.Steps[0].Timeout)
		require.Zero(t, p.Steps[0].Retry.Backoff)
	}
}
