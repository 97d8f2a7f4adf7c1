package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/dairuntime/dair/internal/jsonvalid"
)

// CheckSource applies the rules a document must follow to be stored, beyond Parse's: a JSON
// document is valid UTF-8 without unpaired surrogate escapes (encoding/json would turn them
// into U+FFFD) and repeats no key in an object (YAML's decoder refuses that itself); no step
// and no need is null (YAML's decoder drops null entries of lists silently); and
// retry.max_attempts is a whole number (YAML's decoder truncates 2.5 to 2). Like CheckWith it
// runs when a pipeline is stored or checked, never when a stored version is loaded, so a
// version stored before a rule existed stays readable. Errors match ErrInvalid.
func CheckSource(src []byte) error {
	if isJSONDocument(src) {
		const format = "json"
		if err := jsonvalid.CheckText(src); err != nil {
			return &ParseError{Format: format, Msg: err.Error(), Err: err}
		}
		if err := duplicateKey(src); err != nil {
			return &ParseError{Format: format, Msg: err.Error(), Err: err}
		}
	}
	var doc any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil // Parse reports it in its own terms
	}
	m, _ := doc.(map[string]any)
	steps, _ := m["steps"].([]any)
	for i, st := range steps {
		s, ok := st.(map[string]any)
		if !ok {
			return &ValidationError{Kind: KindBadStep, Field: fmt.Sprintf("steps[%d]", i), Detail: "a step is a mapping with id and uses, got " + yamlKind(st)}
		}
		id, _ := s["id"].(string)
		if needs, ok := s["needs"].([]any); ok {
			for j, n := range needs {
				if n, ok := n.(string); !ok || n == "" {
					return &ValidationError{Kind: KindUnknownDependency, StepID: id, Field: fmt.Sprintf("needs[%d]", j), Detail: "a need is a step id, got " + yamlKind(needs[j])}
				}
			}
		}
		if r, ok := s["retry"].(map[string]any); ok {
			if v, ok := r["max_attempts"]; ok && v != nil && !wholeNumber(v) {
				return &ValidationError{Kind: KindBadRetry, StepID: id, Field: "retry.max_attempts", Detail: fmt.Sprintf("want a whole number of attempts, got %v", v)}
			}
		}
	}
	return nil
}

// wholeNumber reports whether v, a decoded YAML or JSON value, is an integer.
func wholeNumber(v any) bool {
	switch n := v.(type) {
	case int, int64, uint64:
		return true
	case float64:
		return n == math.Trunc(n) && !math.IsInf(n, 0)
	}
	return false
}

// yamlKind names the kind of a decoded value for messages.
func yamlKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if x == "" {
			return "an empty string"
		}
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// duplicateKey returns an error naming the first key that an object of the JSON document src
// holds twice, with its path.
func duplicateKey(src []byte) error {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool // nil for an array
		path   string
		index  int
		expect bool // an object awaiting a key
	}
	var stack []*frame
	child := func(f *frame, key string) string {
		if f.keys == nil {
			return f.path + "[" + strconv.Itoa(f.index) + "]"
		}
		if f.path == "" {
			return key
		}
		return f.path + "." + key
	}
	var lastKey string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // Parse reports malformed documents
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expect {
			if key, ok := tok.(string); ok {
				if top.keys[key] {
					where := child(top, key)
					return fmt.Errorf("key %q appears twice in one object (at %s)", key, where)
				}
				top.keys[key] = true
				top.expect, lastKey = false, key
				continue
			}
		}
		// A value: it ends the pending key of an object, or takes an array slot.
		var here string
		if top != nil {
			here = child(top, lastKey)
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, path: here, expect: true})
				continue
			case '[':
				stack = append(stack, &frame{path: here})
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) > 0 {
			f := stack[len(stack)-1]
			if f.keys == nil {
				f.index++
			} else {
				f.expect = true
			}
		}
	}
}
