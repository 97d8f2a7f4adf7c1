package dag

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of package dag.
var (
	// ErrInvalid is matched (errors.Is) by every *ParseError and *ValidationError: it is what
	// Parse, Validate, Load and Compile return when the pipeline is malformed or invalid.
	ErrInvalid = errors.New("dag: invalid pipeline")

	// ErrRender is wrapped by the error RenderWith returns when a `with` template fails to
	// parse or execute (for example a missing key under missingkey=error).
	ErrRender = errors.New("dag: render template")
)

// ErrorKind names one validation rule. Its string form is stable: tests, the HTTP API and
// clients match on it.
type ErrorKind string

// Validation rules, one per ErrorKind.
const (
	KindCycle             ErrorKind = "cycle"
	KindDuplicateID       ErrorKind = "duplicate_id"
	KindUnknownHandler    ErrorKind = "unknown_handler"
	KindUnknownDependency ErrorKind = "unknown_dependency"
	KindBadTemplate       ErrorKind = "bad_template"
	KindEmptyID           ErrorKind = "empty_id"
	KindBadID             ErrorKind = "bad_id"
	KindMissingUses       ErrorKind = "missing_uses"
	KindNoSteps           ErrorKind = "no_steps"
	KindMissingKey        ErrorKind = "missing_key"
	KindBadKey            ErrorKind = "bad_key"
	KindBadRetry          ErrorKind = "bad_retry"
	KindBadTimeout        ErrorKind = "bad_timeout"
	KindSelfDependency    ErrorKind = "self_dependency"
	KindBadWith           ErrorKind = "bad_with"
	KindBadStep           ErrorKind = "bad_step"
	// KindTooManySteps, KindDocumentTooLarge and KindTemplateTooLarge are the Limits rules.
	KindTooManySteps     ErrorKind = "too_many_steps"
	KindDocumentTooLarge ErrorKind = "document_too_large"
	KindTemplateTooLarge ErrorKind = "template_too_large"
)

// String returns the kind's stable snake_case name.
func (k ErrorKind) String() string { return string(k) }

// ValidationError reports the first rule a pipeline breaks. Its message has the form
//
//	dag: [step "ID": ]KIND: [FIELD: ]DETAIL
//
// except for cycles, whose message is "dag: cycle: a -> b -> a".
type ValidationError struct {
	Kind ErrorKind
	// StepID is the offending step, empty for pipeline-level rules.
	StepID string
	// Field locates the offending value inside the step, e.g. "with.prompt" or "retry.backoff".
	Field string
	// Detail is a human-readable explanation.
	Detail string
	// Path is set for KindCycle only: the step ids of the cycle, starting at the smallest id
	// and ending with it again; "a -> b" means a needs b.
	Path []string
}

// Error implements error.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("dag: ")
	if e.Kind == KindCycle && len(e.Path) > 0 {
		b.WriteString("cycle: ")
		b.WriteString(strings.Join(e.Path, " -> "))
		return b.String()
	}
	if e.StepID != "" {
		fmt.Fprintf(&b, "step %q: ", e.StepID)
	}
	b.WriteString(string(e.Kind))
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// ParseError reports a pipeline document that is not well-formed YAML or JSON, or does not have
// the pipeline's shape (unknown field, wrong type, several documents).
type ParseError struct {
	// Format is "yaml" or "json".
	Format string
	// Line is the 1-based line of the problem, 0 when unknown.
	Line int
	// Msg describes the problem.
	Msg string
	// Err is the decoder's error, if any.
	Err error
}

// Error implements error.
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("dag: parse %s: line %d: %s", e.Format, e.Line, e.Msg)
	}
	return fmt.Sprintf("dag: parse %s: %s", e.Format, e.Msg)
}

// Unwrap returns the decoder's error.
func (e *ParseError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid.
func (e *ParseError) Is(target error) bool { return target == ErrInvalid }
