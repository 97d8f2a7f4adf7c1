package dag

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dairuntime/dair/internal/jsonvalid"
)

var (
	// yamlLineRE finds the line number yaml.v3 puts in its messages.
	yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)
	// yamlUnknownFieldRE rewrites yaml.v3's strict-mode message.
	yamlUnknownFieldRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
	// typeNames hides the decoder's internal type names from users.
	typeNames = strings.NewReplacer(
		"dag.rawPipeline", "pipeline", "dag.rawStep", "step", "dag.rawRetry", "retry",
		"*dag.rawRetry", "retry", "map[string]interface {}", "mapping",
	)
)

// decodeYAML decodes one strict YAML document. yaml.v3 is third-party code fed with user
// input, so a panic inside it becomes a *ParseError.
func decodeYAML(data []byte) (raw *rawPipeline, err error) {
	defer func() {
		if r := recover(); r != nil {
			raw, err = nil, &ParseError{Format: "yaml", Msg: fmt.Sprintf("decoder failed: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	raw = &rawPipeline{}
	if err := dec.Decode(raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{Format: "yaml", Msg: "empty document"}
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return raw, nil
	case err != nil:
		return nil, yamlError(err)
	default:
		return nil, &ParseError{Format: "yaml", Line: extra.Line, Msg: "more than one document"}
	}
}

// yamlError converts a yaml.v3 error, keeping the first line number it mentions.
func yamlError(err error) *ParseError {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	pe := &ParseError{Format: "yaml", Err: err}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			pe.Line = n
		}
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = yamlUnknownFieldRE.ReplaceAllString(msg, `unknown field "$1"`)
	msg = typeNames.Replace(msg)
	if m := yamlTypeRE.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("want %s, got %s", cmp.Or(yamlTargets[m[2]], "a "+m[2]), cmp.Or(yamlKinds[m[1]], m[1]))
	}
	pe.Msg = msg
	return pe
}

// yamlTypeRE matches yaml.v3's message for a value of the wrong kind (after typeNames).
var yamlTypeRE = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `[^`]*`)? into (.+)$")

// yamlKinds and yamlTargets name a YAML tag and a decoding target in a document's terms.
var (
	yamlKinds = map[string]string{"seq": "a list", "map": "a mapping", "str": "a string", "int": "an integer",
		"float": "a number", "bool": "a boolean", "null": "null", "binary": "binary data", "timestamp": "a timestamp"}
	yamlTargets = map[string]string{"pipeline": "a pipeline (a mapping with key and steps)", "step": "a step (a mapping with id and uses)",
		"retry": "a retry mapping", "[]string": "a list of step ids", "[]dag.rawStep": "a list of steps", "[]step": "a list of steps", "mapping": "a mapping",
		"string": "a string", "int": "an integer"}
)

// decodeJSON decodes one strict JSON object.
func decodeJSON(data []byte) (*rawPipeline, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	raw := &rawPipeline{}
	if err := dec.Decode(raw); err != nil {
		return nil, jsonError(data, err)
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		if err := jsonvalid.Fields(data, raw); err != nil {
			return nil, &ParseError{Format: "json", Msg: err.Error(), Err: err}
		}
		return raw, nil
	case err != nil:
		return nil, jsonError(data, err)
	default:
		return nil, &ParseError{Format: "json", Line: lineAt(data, dec.InputOffset()), Msg: "unexpected data after the pipeline object"}
	}
}

// jsonError converts an encoding/json error, computing the line from the byte offset.
func jsonError(data []byte, err error) *ParseError {
	pe := &ParseError{Format: "json", Err: err}
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		pe.Line = lineAt(data, se.Offset)
	case errors.As(err, &te):
		pe.Line = lineAt(data, te.Offset)
		where := "the document"
		if te.Field != "" {
			where = "field " + strconv.Quote(te.Field)
		}
		pe.Msg = fmt.Sprintf("%s: want %s, got %s", where, goKind(te.Type), te.Value)
		return pe
	case errors.Is(err, io.ErrUnexpectedEOF):
		pe.Line = lineAt(data, int64(len(data)))
	}
	pe.Msg = typeNames.Replace(strings.TrimPrefix(err.Error(), "json: "))
	return pe
}

// goKind names the JSON value a decoding target takes.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return goKind(t.Elem())
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	}
	return "another value"
}

// lineAt returns the 1-based line holding byte offset off.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// normalizeWith returns a copy of with holding only JSON-like values (nil, bool, float64,
// string, []any, map[string]any), so that YAML, JSON and Go-built pipelines hash and render
// alike. On error it also returns the path of the offending value.
func normalizeWith(with map[string]any) (map[string]any, string, error) {
	out, err := normalizeValue(with, "with")
	if err != nil {
		var ne *normalizeError
		if errors.As(err, &ne) {
			return nil, ne.path, ne.err
		}
		return nil, "with", err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, "with", fmt.Errorf("want a mapping, got %s", KindOf(out))
	}
	return m, "", nil
}

type normalizeError struct {
	path string
	err  error
}

func (e *normalizeError) Error() string { return e.path + ": " + e.err.Error() }
func (e *normalizeError) Unwrap() error { return e.err }

// maxDepth bounds the nesting of `with` values.
const maxDepth = 64

func normalizeValue(v any, path string) (any, error) {
	return normalizeDepth(v, path, 0)
}

func normalizeDepth(v any, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, &normalizeError{path: path, err: fmt.Errorf("nested more than %d levels", maxDepth)}
	}
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, &normalizeError{path: path, err: fmt.Errorf("number %v is not representable in JSON", x)}
		}
		return x, nil
	case float32:
		return normalizeDepth(float64(x), path, depth)
	case int:
		return float64(x), nil
	case int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return float64(reflect.ValueOf(x).Convert(reflect.TypeOf(float64(0))).Float()), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, &normalizeError{path: path, err: fmt.Errorf("number %s is out of range of a 64-bit float", x)}
		}
		return normalizeDepth(f, path, depth)
	case map[string]any:
		return normalizeMap(x, path, depth)
	case map[any]any:
		return normalizeAnyKeyMap(x, path, depth)
	case []any:
		return normalizeSlice(x, path, depth)
	default:
		return normalizeViaJSON(v, path, depth)
	}
}

// normalizeMap normalizes the values of a JSON object.
func normalizeMap(x map[string]any, path string, depth int) (any, error) {
	out := make(map[string]any, len(x))
	for k, e := range x {
		n, err := normalizeDepth(e, path+"."+k, depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

// normalizeAnyKeyMap turns a YAML mapping into a JSON object: scalar keys become strings, and
// two keys that read the same are an error.
func normalizeAnyKeyMap(x map[any]any, path string, depth int) (any, error) {
	out := make(map[string]any, len(x))
	for k, e := range x {
		var key string
		switch kk := k.(type) {
		case string:
			key = kk
		case bool, int, int64, uint64, float64:
			key = fmt.Sprint(kk)
		default:
			return nil, &normalizeError{path: path, err: fmt.Errorf("mapping key of type %T", k)}
		}
		if _, dup := out[key]; dup {
			return nil, &normalizeError{path: path, err: fmt.Errorf("duplicate mapping key %q", key)}
		}
		n, err := normalizeDepth(e, path+"."+key, depth+1)
		if err != nil {
			return nil, err
		}
		out[key] = n
	}
	return out, nil
}

// normalizeSlice normalizes the elements of a JSON array.
func normalizeSlice(x []any, path string, depth int) (any, error) {
	out := make([]any, len(x))
	for i, e := range x {
		n, err := normalizeDepth(e, fmt.Sprintf("%s[%d]", path, i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// normalizeViaJSON normalizes anything else (Go structs, typed maps and slices, time.Time,
// []byte) by going through encoding/json once and normalizing the generic result.
func normalizeViaJSON(v any, path string, depth int) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &normalizeError{path: path, err: fmt.Errorf("value of type %T: %w", v, err)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, &normalizeError{path: path, err: fmt.Errorf("value of type %T: %w", v, err)}
	}
	return normalizeDepth(generic, path, depth)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
