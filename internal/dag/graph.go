package dag

import (
	"github.com/dairuntime/dair/messages"
)

// Graph is a compiled, acyclic pipeline: each step's topological level (0 for steps without
// needs, else one more than its deepest need) and a deterministic order (level, then id).
// A Graph is immutable and safe for concurrent use.
type Graph struct {
	pipeline   *Pipeline
	order      []string
	level      map[string]int
	needs      map[string][]string // sorted, without repeats
	dependents map[string][]string // sorted
}

// Compile checks p's structure (ids present and unique, needs known, no self-dependency, no
// cycle) and builds its Graph. It does not check handlers, retry, timeouts or templates; use
// Validate or Load for those. Errors are *ValidationError, matching ErrInvalid. The Graph keeps
// p; callers must not modify p afterwards.
func Compile(p *Pipeline) (*Graph, error) {
	if p == nil || len(p.Steps) == 0 {
		return nil, &ValidationError{Kind: KindNoSteps, Detail: "pipeline has no steps"}
	}
	return compile(p)
}

// Pipeline returns the compiled pipeline. The caller must not modify it.
func (g *Graph) Pipeline() *Pipeline { return g.pipeline }

// Len returns the number of steps.
func (g *Graph) Len() int { return len(g.order) }

// Order returns every step id by level, then id. The caller owns the returned slice.
func (g *Graph) Order() []string { return append([]string(nil), g.order...) }

// Level returns the topological level of step id, or -1 when there is no such step.
func (g *Graph) Level(id string) int {
	if l, ok := g.level[id]; ok {
		return l
	}
	return -1
}

// Needs returns the sorted, deduplicated needs of step id. The caller owns the returned slice.
func (g *Graph) Needs(id string) []string { return append([]string(nil), g.needs[id]...) }

// Dependents returns the sorted ids of the steps that need id. The caller owns the slice.
func (g *Graph) Dependents(id string) []string { return append([]string(nil), g.dependents[id]...) }

// Ready returns the pending steps whose needs have all succeeded, ordered by level then step
// id. status maps step id to a messages.Step* status; a missing id or "" counts as pending.
// Ids not in the graph and unknown statuses are ignored. The caller owns the returned slice.
func (g *Graph) Ready(status map[string]string) []string {
	var out []string
	for _, id := range g.order {
		if !isPending(status[id]) {
			continue
		}
		if g.needsSucceeded(id, status) {
			out = append(out, id)
		}
	}
	return out
}

// Blocked returns the pending steps that can never become ready because a need ended without
// succeeding (failed, skipped or cancelled), ordered like Ready. An engine marks them skipped.
func (g *Graph) Blocked(status map[string]string) []string {
	var out []string
	for _, id := range g.order {
		if !isPending(status[id]) {
			continue
		}
		for _, n := range g.needs[id] {
			st := status[n]
			if st == messages.StepFailed || st == messages.StepSkipped || st == messages.StepCancelled {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

func (g *Graph) needsSucceeded(id string, status map[string]string) bool {
	for _, n := range g.needs[id] {
		if status[n] != messages.StepSucceeded {
			return false
		}
	}
	return true
}

func isPending(s string) bool { return s == "" || s == messages.StepPending }

// Width returns the number of steps of the graph's widest topological level: an upper bound
// on how many of its steps the level-ordered ready set can hand out at once, used to size an
// execution's worker budget. It is at least 1 for a non-empty graph.
func (g *Graph) Width() int {
	count := map[int]int{}
	w := 0
	for _, id := range g.order {
		count[g.level[id]]++
		w = max(w, count[g.level[id]])
	}
	return w
}
