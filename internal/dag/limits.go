package dag

import (
	"fmt"
	"strings"
)

// Default limits: what one pipeline may cost a node unless the node raises them.
const (
	// DefaultMaxSteps is the default Limits.MaxSteps.
	DefaultMaxSteps = 1000
	// DefaultMaxDocumentBytes is the default Limits.MaxDocumentBytes (512 KiB).
	DefaultMaxDocumentBytes = 512 << 10
	// DefaultMaxTemplateBytes is the default Limits.MaxTemplateBytes (64 KiB).
	DefaultMaxTemplateBytes = 64 << 10
)

// Limits bound the size of a pipeline a node accepts, so that no request can cost it more than
// a bounded amount of time or memory: parsing, validation, hashing and compilation are linear
// in the document's size. The zero value of each field means its default.
//
// Limits are checked where definitions enter a node (the HTTP API, pipeline files); Load and
// Compile do not check them, so versions stored under higher limits keep loading.
type Limits struct {
	// MaxSteps bounds the number of steps. Default DefaultMaxSteps (1,000).
	MaxSteps int
	// MaxDocumentBytes bounds the YAML or JSON document. Default DefaultMaxDocumentBytes.
	MaxDocumentBytes int
	// MaxTemplateBytes bounds each templated string of a step's `with` (one containing "{{").
	// Default DefaultMaxTemplateBytes.
	MaxTemplateBytes int
}

// DefaultLimits returns the limits of a node that sets none.
func DefaultLimits() Limits {
	return Limits{MaxSteps: DefaultMaxSteps, MaxDocumentBytes: DefaultMaxDocumentBytes, MaxTemplateBytes: DefaultMaxTemplateBytes}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxSteps <= 0 {
		l.MaxSteps = d.MaxSteps
	}
	if l.MaxDocumentBytes <= 0 {
		l.MaxDocumentBytes = d.MaxDocumentBytes
	}
	if l.MaxTemplateBytes <= 0 {
		l.MaxTemplateBytes = d.MaxTemplateBytes
	}
	return l
}

// CheckDocument returns a *ValidationError of kind KindDocumentTooLarge (matching ErrInvalid)
// when data is larger than MaxDocumentBytes. Call it before Parse.
func (l Limits) CheckDocument(data []byte) error {
	l = l.withDefaults()
	if len(data) > l.MaxDocumentBytes {
		return &ValidationError{Kind: KindDocumentTooLarge,
			Detail: fmt.Sprintf("the document is %d bytes; the limit is %d", len(data), l.MaxDocumentBytes)}
	}
	return nil
}

// Check returns the first limit p breaks as a *ValidationError (KindTooManySteps or
// KindTemplateTooLarge, matching ErrInvalid), or nil. It takes time linear in p's size and
// stops at the first broken limit. It does not modify p.
func (l Limits) Check(p *Pipeline) error {
	l = l.withDefaults()
	if p == nil {
		return nil
	}
	if len(p.Steps) > l.MaxSteps {
		return &ValidationError{Kind: KindTooManySteps,
			Detail: fmt.Sprintf("the pipeline has %d steps; the limit is %d", len(p.Steps), l.MaxSteps)}
	}
	for i := range p.Steps {
		if err := l.checkTemplates(p.Steps[i].ID, p.Steps[i].With, "with"); err != nil {
			return err
		}
	}
	return nil
}

// checkTemplates walks v (a `with` value) and checks every templated string's size.
func (l Limits) checkTemplates(stepID string, v any, path string) error {
	switch x := v.(type) {
	case string:
		if len(x) > l.MaxTemplateBytes && strings.Contains(x, "{{") {
			return &ValidationError{Kind: KindTemplateTooLarge, StepID: stepID, Field: path,
				Detail: fmt.Sprintf("the template is %d bytes; the limit is %d", len(x), l.MaxTemplateBytes)}
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := l.checkTemplates(stepID, x[k], path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := l.checkTemplates(stepID, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]string:
		for _, k := range sortedKeys(x) {
			if err := l.checkTemplates(stepID, x[k], path+"."+k); err != nil {
				return err
			}
		}
	case []string:
		for i, e := range x {
			if err := l.checkTemplates(stepID, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
