package dag

import (
	"encoding/json"
	"fmt"
	"math"

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
		if err := jsonvalid.CheckText(src); err != nil { // repeated keys too, with their path
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
			return &ValidationError{Kind: KindBadStep, Field: fmt.Sprintf("steps[%d]", i), Detail: "a step is a mapping with id and uses, got " + KindOf(st)}
		}
		id, _ := s["id"].(string)
		if needs, ok := s["needs"].([]any); ok {
			for j, n := range needs {
				if n, ok := n.(string); !ok || n == "" {
					return &ValidationError{Kind: KindUnknownDependency, StepID: id, Field: fmt.Sprintf("needs[%d]", j), Detail: "a need is a step id, got " + KindOf(needs[j])}
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

// KindOf names the kind of a decoded YAML or JSON value for messages ("a string", "a list",
// "a mapping", ...), in the user's terms rather than Go's.
func KindOf(v any) string {
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
	case int, int64, uint64, float64, json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
