package dag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RetryPolicy says how often a failed step is attempted and how long to wait in between.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts; 0 means 1 (no retry).
	MaxAttempts int
	// Backoff is the wait before the second attempt; later waits double it.
	Backoff time.Duration
	// MaxBackoff caps the wait; 0 means no cap.
	MaxBackoff time.Duration
}

// Attempts returns the effective number of attempts: MaxAttempts, or 1 when it is 0.
func (r RetryPolicy) Attempts() int {
	if r.MaxAttempts <= 0 {
		return 1
	}
	return r.MaxAttempts
}

// Step is one node of a pipeline.
type Step struct {
	// ID is unique within the pipeline.
	ID string
	// Uses names the registered step handler.
	Uses string
	// With is the handler's input; its string values are templates (see RenderWith). Parsed
	// pipelines hold only JSON-like values: nil, bool, float64, string, []any, map[string]any.
	With map[string]any
	// Needs lists the steps that must succeed before this one starts.
	Needs []string
	// Retry is the step's retry policy.
	Retry RetryPolicy
	// Timeout bounds one attempt; 0 means no timeout.
	Timeout time.Duration
}

// Pipeline is a parsed pipeline definition.
type Pipeline struct {
	// Key is the stable name runs are submitted under.
	Key string
	// Description is free text.
	Description string
	// Steps in document order.
	Steps []Step
	// Hash is the hex SHA-256 of the pipeline's canonical form (see ComputeHash); Parse and
	// Load set it.
	Hash string
	// Source is the document the pipeline was parsed from, nil for pipelines built in Go.
	Source []byte
	// InputSchema is the JSON Schema (draft 2020-12 unless its $schema says otherwise) that
	// run inputs must match, as a JSON-like value; nil when the pipeline declares none. It
	// must be self-contained: a $ref to another document does not load. See CheckInput.
	InputSchema any

	// index makes Step constant-time; built on first use.
	index atomic.Pointer[stepIndex]
	// schema is InputSchema compiled; built by Parse or on first use.
	schema atomic.Pointer[jsonschema.Schema]
	// inputRefs caches InputRefs.
	inputRefs atomic.Pointer[[]InputRef]
}

// Step returns the step with the given id. The pointer refers into p.Steps. It is
// goroutine-safe and takes constant time: the first call builds an index of the ids, which
// later calls check against p.Steps (a pipeline changed afterwards is searched linearly).
func (p *Pipeline) Step(id string) (*Step, bool) {
	if p == nil {
		return nil, false
	}
	idx := p.index.Load()
	if idx == nil || idx.n != len(p.Steps) {
		idx = newStepIndex(p.Steps)
		p.index.Store(idx)
	}
	if i, ok := idx.pos[id]; ok && i < len(p.Steps) && p.Steps[i].ID == id {
		return &p.Steps[i], true
	}
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return &p.Steps[i], true
		}
	}
	return nil, false
}

// stepIndex maps step ids to their position in Pipeline.Steps. It is immutable once built.
type stepIndex struct {
	n   int // len(Steps) when built
	pos map[string]int
}

func newStepIndex(steps []Step) *stepIndex {
	idx := &stepIndex{n: len(steps), pos: make(map[string]int, len(steps))}
	for i := range steps {
		if _, dup := idx.pos[steps[i].ID]; !dup {
			idx.pos[steps[i].ID] = i
		}
	}
	return idx
}

// Parse decodes a pipeline document: JSON when its first non-space byte is '{', YAML
// otherwise. Decoding is strict: unknown fields are an error. Parse checks syntax and shape
// only (durations, value types) and sets Hash and Source; call Validate, or use Load, for the
// rules. Errors are *ParseError or *ValidationError, both matching ErrInvalid.
func Parse(data []byte) (*Pipeline, error) {
	var (
		raw *rawPipeline
		err error
	)
	if isJSONDocument(data) {
		raw, err = decodeJSON(data)
	} else {
		raw, err = decodeYAML(data)
	}
	if err != nil {
		return nil, err
	}
	p, err := raw.pipeline()
	if err != nil {
		return nil, err
	}
	p.Source = bytes.Clone(data)
	if p.InputSchema != nil {
		if _, err := p.inputSchema(); err != nil {
			return nil, err
		}
	}
	hash, err := p.ComputeHash()
	if err != nil {
		return nil, err
	}
	p.Hash = hash
	return p, nil
}

// Load parses, validates and hashes a pipeline document. knownHandler reports whether a `uses`
// name is registered; nil skips that check. Errors match ErrInvalid.
func Load(data []byte, knownHandler func(string) bool) (*Pipeline, error) {
	p, err := Parse(data)
	if err != nil {
		return nil, err
	}
	// Parse set the hash; Validate does not modify p.
	if err := Validate(p, knownHandler); err != nil {
		return nil, err
	}
	return p, nil
}

// rawPipeline is the document shape shared by YAML and JSON.
type rawPipeline struct {
	Key         string    `yaml:"key" json:"key"`
	Description string    `yaml:"description" json:"description"`
	InputSchema any       `yaml:"input_schema" json:"input_schema"`
	Steps       []rawStep `yaml:"steps" json:"steps"`
}

type rawStep struct {
	ID      string         `yaml:"id" json:"id"`
	Uses    string         `yaml:"uses" json:"uses"`
	With    map[string]any `yaml:"with" json:"with"`
	Needs   []string       `yaml:"needs" json:"needs"`
	Retry   *rawRetry      `yaml:"retry" json:"retry"`
	Timeout any            `yaml:"timeout" json:"timeout"`
}

type rawRetry struct {
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	Backoff     any `yaml:"backoff" json:"backoff"`
	MaxBackoff  any `yaml:"max_backoff" json:"max_backoff"`
}

// pipeline converts the decoded document, parsing durations and normalizing `with` values.
func (r *rawPipeline) pipeline() (*Pipeline, error) {
	p := &Pipeline{Key: r.Key, Description: r.Description, Steps: make([]Step, 0, len(r.Steps))}
	if r.InputSchema != nil {
		schema, err := normalizeValue(r.InputSchema, "input_schema")
		if err != nil {
			return nil, &ValidationError{Kind: KindBadInputSchema, Field: "input_schema", Detail: err.Error()}
		}
		p.InputSchema = schema
	}
	for _, rs := range r.Steps {
		s := Step{ID: rs.ID, Uses: rs.Uses}
		if len(rs.Needs) > 0 {
			s.Needs = append([]string(nil), rs.Needs...)
		}
		if rs.With != nil {
			with, field, err := normalizeWith(rs.With)
			if err != nil {
				return nil, &ValidationError{Kind: KindBadWith, StepID: rs.ID, Field: field, Detail: err.Error()}
			}
			s.With = with
		}
		var err error
		if s.Timeout, err = parseDuration(rs.Timeout); err != nil {
			return nil, &ValidationError{Kind: KindBadTimeout, StepID: rs.ID, Field: "timeout", Detail: err.Error()}
		}
		if rs.Retry != nil {
			s.Retry.MaxAttempts = rs.Retry.MaxAttempts
			if s.Retry.Backoff, err = parseDuration(rs.Retry.Backoff); err != nil {
				return nil, &ValidationError{Kind: KindBadRetry, StepID: rs.ID, Field: "retry.backoff", Detail: err.Error()}
			}
			if s.Retry.MaxBackoff, err = parseDuration(rs.Retry.MaxBackoff); err != nil {
				return nil, &ValidationError{Kind: KindBadRetry, StepID: rs.ID, Field: "retry.max_backoff", Detail: err.Error()}
			}
		}
		p.Steps = append(p.Steps, s)
	}
	return p, nil
}

// isJSONDocument reports whether data is decoded as JSON (its first non-space byte is '{');
// anything else is YAML.
func isJSONDocument(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// parseDuration accepts a Go duration string; nil (absent) and the number 0 are zero.
func parseDuration(v any) (time.Duration, error) {
	switch d := v.(type) {
	case nil:
		return 0, nil
	case int:
		if d == 0 {
			return 0, nil
		}
	case float64:
		if d == 0 {
			return 0, nil
		}
	case json.Number:
		if f, err := d.Float64(); err == nil && f == 0 {
			return 0, nil
		}
	case string:
		if d == "" {
			return 0, nil
		}
		out, err := time.ParseDuration(d)
		if err != nil {
			return 0, fmt.Errorf("want a duration such as \"10s\": %w", err)
		}
		return out, nil
	}
	return 0, fmt.Errorf("want a duration string such as \"10s\", got %v", v)
}
