package dag_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/dag"
)

const greetWithSchema = `
key: greet
input_schema:
  type: object
  required: [name]
  properties:
    name: {type: string, minLength: 1}
    tags: {type: array, items: {type: string}}
    who: {type: object, properties: {first: {type: string}}}
steps:
  - id: hello
    uses: echo
    with: {value: "hello {{ .input.name }}"}
  - id: maybe
    uses: echo
    with: {value: "{{ if index .input \"loud\" }}{{ .input.shout }}{{ end }}{{ index .input \"opt\" }}"}
  - id: deep
    uses: echo
    with: {value: "{{ .input.who.first }}"}
`

func TestPipeline_CheckInput(t *testing.T) {
	p, err := dag.Load([]byte(greetWithSchema), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, input string
		wantPath    string // "" and ok: accepted
		ok          bool
		wantDetail  string
	}{
		{name: "valid", input: `{"name":"ada","who":{"first":"a"}}`, ok: true},
		{name: "conditional and index refs are optional", input: `{"name":"ada","who":{"first":"a"},"loud":false}`, ok: true},
		{name: "no input", input: ``, wantPath: "", wantDetail: "no input given"},
		{name: "missing required", input: `{"who":{"first":"a"}}`, wantPath: "/name", wantDetail: "requires"},
		{name: "wrong type", input: `{"name":3,"who":{"first":"a"}}`, wantPath: "/name", wantDetail: "want string"},
		{name: "nested item", input: `{"name":"a","tags":["x",2],"who":{}}`, wantPath: "/tags/1", wantDetail: "want string"},
		{name: "too short", input: `{"name":"","who":{"first":"a"}}`, wantPath: "/name", wantDetail: "minLength"},
		{name: "template field the schema does not require", input: `{"name":"ada"}`, wantPath: "/who/first",
			wantDetail: `step "deep" uses .input.who.first`},
		{name: "null on the way", input: `{"name":"ada","who":null}`, wantPath: "/who", wantDetail: "want object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := p.CheckInput([]byte(tc.input))
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckInput(%s) = %v", tc.input, err)
				}
				return
			}
			var ie *dag.InputError
			if !errors.As(err, &ie) || !errors.Is(err, dag.ErrBadInput) {
				t.Fatalf("CheckInput(%s) = %v, want an *InputError", tc.input, err)
			}
			if ie.Path != tc.wantPath || !strings.Contains(ie.Detail, tc.wantDetail) {
				t.Fatalf("CheckInput(%s) = path %q detail %q; want path %q detail containing %q", tc.input, ie.Path,
					ie.Detail, tc.wantPath, tc.wantDetail)
			}
		})
	}
}

func TestPipeline_CheckInput_withoutSchemaAcceptsAll(t *testing.T) {
	p, err := dag.Load([]byte("key: k\nsteps:\n  - id: a\n    uses: echo\n    with: {value: \"{{ .input.name }}\"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckInput(nil); err != nil {
		t.Fatalf("no schema: %v", err)
	}
	w := p.InputWarnings()
	if len(w) != 1 || !strings.Contains(w[0], `step "a" uses .input.name`) || !strings.Contains(w[0], "input_schema") {
		t.Fatalf("warnings = %q", w)
	}
}

func TestParse_inputSchema(t *testing.T) {
	cases := []struct {
		name, doc string
		wantErr   string
	}{
		{"not a schema", "key: k\ninput_schema: {type: 3}\nsteps: [{id: a, uses: echo}]\n", "bad_input_schema"},
		{"external ref", "key: k\ninput_schema: {$ref: \"file:///etc/passwd\"}\nsteps: [{id: a, uses: echo}]\n", "bad_input_schema"},
		{"json", `{"key":"k","input_schema":{"type":"object"},"steps":[{"id":"a","uses":"echo"}]}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dag.Parse([]byte(tc.doc))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, dag.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse = %v, want %s", err, tc.wantErr)
			}
		})
	}
	a, err := dag.Parse([]byte("key: k\nsteps: [{id: a, uses: echo}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := dag.Parse([]byte("key: k\ninput_schema: {type: object}\nsteps: [{id: a, uses: echo}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash == b.Hash {
		t.Fatal("an input_schema changes the pipeline's hash")
	}
}
