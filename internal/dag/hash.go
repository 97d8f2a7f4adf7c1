package dag

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// hashVersion prefixes the canonical form, so a change of the form is a deliberate one.
const hashVersion = "dair.pipeline.v1\n"

// canonicalPipeline is the hashed form: steps sorted by id, needs sorted and deduplicated,
// durations as Go duration strings, MaxAttempts as the effective count, `with` normalized.
// encoding/json sorts map keys, so the encoding is deterministic.
type canonicalPipeline struct {
	Key         string          `json:"key"`
	Description string          `json:"description"`
	InputSchema any             `json:"input_schema,omitempty"`
	Steps       []canonicalStep `json:"steps"`
}

type canonicalStep struct {
	ID          string         `json:"id"`
	Uses        string         `json:"uses"`
	With        map[string]any `json:"with,omitempty"`
	Needs       []string       `json:"needs,omitempty"`
	MaxAttempts int            `json:"max_attempts"`
	Backoff     string         `json:"backoff"`
	MaxBackoff  string         `json:"max_backoff"`
	Timeout     string         `json:"timeout"`
}

// ComputeHash returns the hex SHA-256 of p's canonical JSON form. It depends on the pipeline's
// meaning, not its bytes: YAML and JSON spellings of one pipeline, reformatting, step order,
// needs order and "1000ms" versus "1s" all hash alike; any change of a value changes it. It does
// not set p.Hash. An error (matching ErrInvalid) means a `with` value cannot be encoded.
func (p *Pipeline) ComputeHash() (string, error) {
	b, err := p.canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(hashVersion), b...))
	return hex.EncodeToString(sum[:]), nil
}

// canonical returns the canonical JSON encoding of p.
func (p *Pipeline) canonical() ([]byte, error) {
	c := canonicalPipeline{Key: p.Key, Description: p.Description, Steps: make([]canonicalStep, 0, len(p.Steps))}
	if p.InputSchema != nil {
		schema, err := normalizeValue(p.InputSchema, "input_schema")
		if err != nil {
			return nil, &ValidationError{Kind: KindBadInputSchema, Field: "input_schema", Detail: err.Error()}
		}
		c.InputSchema = schema
	}
	for _, s := range p.Steps {
		cs := canonicalStep{
			ID:          s.ID,
			Uses:        s.Uses,
			Needs:       dedupeSorted(s.Needs),
			MaxAttempts: s.Retry.Attempts(),
			Backoff:     s.Retry.Backoff.String(),
			MaxBackoff:  s.Retry.MaxBackoff.String(),
			Timeout:     s.Timeout.String(),
		}
		if len(s.With) > 0 {
			with, field, err := normalizeWith(s.With)
			if err != nil {
				return nil, &ValidationError{Kind: KindBadWith, StepID: s.ID, Field: field, Detail: err.Error()}
			}
			cs.With = with
		}
		c.Steps = append(c.Steps, cs)
	}
	sort.SliceStable(c.Steps, func(i, j int) bool { return c.Steps[i].ID < c.Steps[j].ID })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("dag: encode canonical form: %w", err)
	}
	return buf.Bytes(), nil
}

// dedupeSorted returns a sorted copy of ids without repeats, nil when empty.
func dedupeSorted(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	out := append([]string(nil), ids...)
	sort.Strings(out)
	n := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[n-1] {
			out[n] = out[i]
			n++
		}
	}
	return out[:n]
}
