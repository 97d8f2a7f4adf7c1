package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// ErrBadInput is matched (errors.Is) by every *InputError: CheckInput's answer for a run
// input that does not match the pipeline's input_schema, or lacks a field its templates use.
var ErrBadInput = errors.New("dag: bad input")

// KindBadInputSchema is the rule broken by an input_schema that is not a valid JSON Schema
// (or refers to another document: schemas must be self-contained).
const KindBadInputSchema ErrorKind = "bad_input_schema"

// inputSchemaURL names the schema resource; no loader is installed, so a $ref outside the
// document fails to compile instead of reading files or the network.
const inputSchemaURL = "urn:dair:input_schema"

// InputError reports a run input that the pipeline refuses. Its message has the form
//
//	dag: bad input: at "/PATH": DETAIL
//
// where PATH is a JSON pointer into the input ("" for the whole input).
type InputError struct {
	// Path is the JSON pointer of the offending value in the input.
	Path string
	// Detail explains the problem.
	Detail string
}

// Error implements error.
func (e *InputError) Error() string {
	return fmt.Sprintf("dag: bad input: at %q: %s", e.Path, e.Detail)
}

// Is reports whether target is ErrBadInput.
func (e *InputError) Is(target error) bool { return target == ErrBadInput }

// compileInputSchema compiles an input_schema document (a JSON-like value). It reads nothing
// else: no files, no network. The compiler is third-party code fed with user input, so a
// panic inside it becomes an error.
func compileInputSchema(doc any) (sch *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			sch, err = nil, fmt.Errorf("schema compiler failed: %v", r)
		}
	}()
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(inputSchemaURL, v); err != nil {
		return nil, err
	}
	return c.Compile(inputSchemaURL)
}

// HasInputSchema reports whether the pipeline declares an input_schema.
func (p *Pipeline) HasInputSchema() bool { return p != nil && p.InputSchema != nil }

// CheckInput checks a run's input (JSON; empty means no input) before the run is created.
// Without an input_schema it accepts every input. With one, the input must match it, and every
// `.input.x.y` that a step's `with` templates evaluate unconditionally (outside if, with and
// range bodies, and not through index) must be present. A mismatch is an *InputError naming
// the first failing path; a schema that does not compile is a *ValidationError. It is
// goroutine-safe; its cost is linear in the input and the templates.
func (p *Pipeline) CheckInput(input []byte) error {
	if !p.HasInputSchema() {
		return nil
	}
	sch, err := p.inputSchema()
	if err != nil {
		return err
	}
	var v any
	if len(bytes.TrimSpace(input)) > 0 {
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(input)); err != nil {
			return &InputError{Detail: fmt.Sprintf("not JSON: %v", err)}
		}
	}
	if err := validate(sch, v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return schemaInputError(ve, v == nil)
		}
		return &InputError{Detail: err.Error()}
	}
	for _, r := range p.InputRefs() {
		if r.Conditional || hasPath(v, r.Path) {
			continue
		}
		return &InputError{Path: pointer(r.Path), Detail: fmt.Sprintf("missing; step %q uses .input.%s in %s",
			r.StepID, strings.Join(r.Path, "."), r.Field)}
	}
	return nil
}

// validate runs the schema validator, turning a panic inside it into an error.
func validate(sch *jsonschema.Schema, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schema validator failed: %v", r)
		}
	}()
	return sch.Validate(v)
}

// inputSchema returns the compiled input_schema, compiling it once.
func (p *Pipeline) inputSchema() (*jsonschema.Schema, error) {
	if s := p.schema.Load(); s != nil {
		return s, nil
	}
	s, err := compileInputSchema(p.InputSchema)
	if err != nil {
		return nil, &ValidationError{Kind: KindBadInputSchema, Field: "input_schema", Detail: oneLineError(err)}
	}
	p.schema.Store(s)
	return s, nil
}

// schemaInputError turns the schema validator's error tree into the InputError of its first
// leaf: the deepest, most precise failure.
func schemaInputError(ve *jsonschema.ValidationError, absent bool) *InputError {
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	// The validator formats a lone error as "at '/p': detail"; keep the detail.
	lone := *leaf
	lone.Causes = nil
	detail := lone.Error()
	if _, d, ok := strings.Cut(detail, "': "); ok && strings.HasPrefix(detail, "at '") {
		detail = d
	}
	path := leaf.InstanceLocation
	if req, ok := leaf.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
		path = append(append([]string(nil), path...), req.Missing[0])
		detail = "missing; the input_schema requires it"
	}
	if absent && len(leaf.InstanceLocation) == 0 {
		detail = "no input given; " + detail
	}
	return &InputError{Path: pointer(path), Detail: detail}
}

// pointer encodes path as a JSON pointer ("" for the root).
func pointer(path []string) string {
	var b strings.Builder
	for _, s := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(s))
	}
	return b.String()
}

// hasPath reports whether v holds a value at path, each element a mapping key, as templates
// evaluate `.input.a.b` (a null on the way is missing: the template would fail on it).
func hasPath(v any, path []string) bool {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// oneLineError folds an error's multi-line message.
func oneLineError(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}
