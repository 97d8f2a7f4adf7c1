package dag

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
)

var (
	// keyRE is the pipeline key rule of CONTRACT.md.
	keyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
	// idRE keeps step ids usable in templates, ledgers and idempotency keys
	// ("<execution_id>/<step_id>").
	idRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`)
)

// MaxAttemptsLimit is the largest retry.max_attempts Validate accepts.
const MaxAttemptsLimit = 1000

// Validate checks p against every rule and returns the first broken one as a
// *ValidationError (matching ErrInvalid), or nil. Rules are checked in a fixed order: the
// pipeline's key and steps; then each step in document order (id, uses, handler, retry,
// timeout, with); then needs (self, unknown); then cycles; then templates. knownHandler reports
// whether a `uses` name is registered; nil skips that check. Validate does not modify p.
func Validate(p *Pipeline, knownHandler func(name string) bool) error {
	if p == nil {
		return &ValidationError{Kind: KindNoSteps, Detail: "nil pipeline"}
	}
	switch {
	case p.Key == "":
		return &ValidationError{Kind: KindMissingKey, Detail: "pipeline has no key"}
	case !keyRE.MatchString(p.Key):
		return &ValidationError{Kind: KindBadKey, Detail: fmt.Sprintf("key %q must match %s", p.Key, keyRE)}
	case len(p.Steps) == 0:
		return &ValidationError{Kind: KindNoSteps, Detail: "pipeline has no steps"}
	}
	seen := make(map[string]bool, len(p.Steps))
	for i := range p.Steps {
		if err := validateStep(i, &p.Steps[i], seen, knownHandler); err != nil {
			return err
		}
	}
	g, err := compile(p)
	if err != nil {
		return err
	}
	return validateTemplates(p, g)
}

// validateStep checks one step's own fields; seen collects the ids met so far.
func validateStep(i int, s *Step, seen map[string]bool, knownHandler func(string) bool) error {
	if err := checkID(i, s.ID, seen); err != nil {
		return err
	}
	bad := func(kind ErrorKind, field, format string, args ...any) error {
		return &ValidationError{Kind: kind, StepID: s.ID, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case strings.TrimSpace(s.Uses) == "":
		return bad(KindMissingUses, "uses", "step has no handler")
	case knownHandler != nil && !knownHandler(s.Uses):
		return bad(KindUnknownHandler, "uses", "no handler registered as %q", s.Uses)
	case s.Retry.MaxAttempts < 0 || s.Retry.MaxAttempts > MaxAttemptsLimit:
		return bad(KindBadRetry, "retry.max_attempts", "%d is outside 0..%d", s.Retry.MaxAttempts, MaxAttemptsLimit)
	case s.Retry.Backoff < 0:
		return bad(KindBadRetry, "retry.backoff", "negative backoff %s", s.Retry.Backoff)
	case s.Retry.MaxBackoff < 0:
		return bad(KindBadRetry, "retry.max_backoff", "negative max_backoff %s", s.Retry.MaxBackoff)
	case s.Retry.MaxBackoff > 0 && s.Retry.MaxBackoff < s.Retry.Backoff:
		return bad(KindBadRetry, "retry.max_backoff", "max_backoff %s is less than backoff %s", s.Retry.MaxBackoff, s.Retry.Backoff)
	case s.Timeout < 0:
		return bad(KindBadTimeout, "timeout", "negative timeout %s", s.Timeout)
	}
	if len(s.With) > 0 {
		if _, field, err := normalizeWith(s.With); err != nil {
			return bad(KindBadWith, field, "%v", err)
		}
	}
	return nil
}

// checkID checks the id of the i-th step (0-based) and records it in seen.
func checkID(i int, id string, seen map[string]bool) error {
	switch {
	case id == "":
		return &ValidationError{Kind: KindEmptyID, Detail: fmt.Sprintf("step #%d has no id", i+1)}
	case !idRE.MatchString(id):
		return &ValidationError{Kind: KindBadID, StepID: id, Field: "id", Detail: fmt.Sprintf("id must match %s", idRE)}
	case seen[id]:
		return &ValidationError{Kind: KindDuplicateID, StepID: id, Field: "id", Detail: "id is used by more than one step"}
	}
	seen[id] = true
	return nil
}

// checkNeeds checks that every need names another existing step.
func checkNeeds(p *Pipeline, exists map[string]bool) error {
	for _, s := range p.Steps {
		for _, n := range s.Needs {
			switch {
			case n == s.ID:
				return &ValidationError{Kind: KindSelfDependency, StepID: s.ID, Field: "needs", Detail: "step needs itself"}
			case !exists[n]:
				return &ValidationError{Kind: KindUnknownDependency, StepID: s.ID, Field: "needs", Detail: fmt.Sprintf("no step with id %q", n)}
			}
		}
	}
	return nil
}

// findCycle returns a cycle of the needs relation, or nil. ids and every needs list must be
// sorted so the answer is deterministic; the cycle starts and ends at its smallest id.
func findCycle(ids []string, needs map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(ids))
	var stack []string
	var visit func(u string) []string
	visit = func(u string) []string {
		color[u] = grey
		stack = append(stack, u)
		for _, v := range needs[u] {
			switch color[v] {
			case grey:
				for i := len(stack) - 1; i >= 0; i-- {
					if stack[i] == v {
						return rotateCycle(stack[i:])
					}
				}
			case white:
				if c := visit(v); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[u] = black
		return nil
	}
	for _, id := range ids {
		if color[id] == white {
			if c := visit(id); c != nil {
				return c
			}
		}
	}
	return nil
}

// rotateCycle turns the cycle members c (in needs order) into a path starting and ending at
// the smallest id.
func rotateCycle(c []string) []string {
	m := 0
	for i := range c {
		if c[i] < c[m] {
			m = i
		}
	}
	out := make([]string, 0, len(c)+1)
	out = append(out, c[m:]...)
	out = append(out, c[:m]...)
	return append(out, c[m])
}

// CheckWith runs check (a handler registry's static check of `with`, see step.Registry) on
// every step of p in document order and returns the first failure as a *ValidationError of
// kind bad_with (matching ErrInvalid), or nil.
func CheckWith(p *Pipeline, check func(uses string, with map[string]any) (field string, err error)) error {
	for _, s := range p.Steps {
		if field, err := check(s.Uses, s.With); err != nil {
			if field != "" {
				field = "with." + field
			}
			return &ValidationError{Kind: KindBadWith, StepID: s.ID, Field: cmp.Or(field, "with"), Detail: err.Error()}
		}
	}
	return nil
}
