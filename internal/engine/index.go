package engine

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/dag"
)

// Index is what a Machine needs to know about a compiled pipeline, keyed by position in the
// graph's order (level, then id): each step's needs and dependents as positions, its attempt
// budget, which steps are leaves and which step outputs its templates read. Building it is
// O(steps + edges); every lookup after that is O(1). An Index is immutable and safe for
// concurrent use: build it once per pipeline version and share it between executions.
type Index struct {
	graph      *dag.Graph
	ids        []string
	pos        map[string]int32
	steps      []*dag.Step
	needs      [][]int32
	dependents [][]int32
	leaf       []bool
	refs       []stepRefs
}

// NewIndex indexes g. It fails (ErrNoGraph, or an error naming the step) only when g is nil
// or inconsistent with its pipeline. The Index keeps g.
func NewIndex(g *dag.Graph) (*Index, error) {
	if g == nil || g.Pipeline() == nil {
		return nil, ErrNoGraph
	}
	order := g.Order()
	ix := &Index{
		graph:      g,
		ids:        order,
		pos:        make(map[string]int32, len(order)),
		steps:      make([]*dag.Step, len(order)),
		needs:      make([][]int32, len(order)),
		dependents: make([][]int32, len(order)),
		leaf:       make([]bool, len(order)),
		refs:       make([]stepRefs, len(order)),
	}
	for i, id := range order {
		ix.pos[id] = int32(i)
	}
	p := g.Pipeline()
	for i := range p.Steps {
		s := &p.Steps[i]
		at, ok := ix.pos[s.ID]
		if !ok {
			return nil, fmt.Errorf("engine: index pipeline %q: step %q is not in its graph", p.Key, s.ID)
		}
		ix.steps[at] = s
		ix.refs[at] = templateRefs(s.With)
	}
	for i, id := range order {
		if ix.steps[i] == nil {
			return nil, fmt.Errorf("engine: index pipeline %q: graph step %q is not in the pipeline", p.Key, id)
		}
		ix.needs[i] = ix.positions(g.Needs(id))
		ix.dependents[i] = ix.positions(g.Dependents(id))
		ix.leaf[i] = len(ix.dependents[i]) == 0
	}
	return ix, nil
}

func (ix *Index) positions(ids []string) []int32 {
	if len(ids) == 0 {
		return nil
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = ix.pos[id]
	}
	return out
}

// Graph returns the indexed graph.
func (ix *Index) Graph() *dag.Graph { return ix.graph }

// Len returns the number of steps.
func (ix *Index) Len() int { return len(ix.ids) }

// maxAttempts is the attempt budget of the step at position i.
func (ix *Index) maxAttempts(i int32) int { return ix.steps[i].Retry.Attempts() }

// maxAttemptsOf is maxAttempts by id, for dag.Graph.Resume.
func (ix *Index) maxAttemptsOf(id string) int {
	if i, ok := ix.pos[id]; ok {
		return ix.maxAttempts(i)
	}
	return 1
}

// backoff is the wait after the failed attempt `attempt` (1-based) of the step at i: the
// policy's Backoff (default 100ms) doubled per earlier attempt, capped by MaxBackoff.
func (ix *Index) backoff(i int32, attempt int) time.Duration {
	r := ix.steps[i].Retry
	b := r.Backoff
	if b <= 0 {
		b = DefaultBackoff
	}
	for n := 1; n < attempt && b < time.Hour; n++ {
		b *= 2
	}
	if r.MaxBackoff > 0 && b > r.MaxBackoff {
		b = r.MaxBackoff
	}
	return b
}

// DefaultBackoff is the wait before a retry when the step's policy sets none.
const DefaultBackoff = 100 * time.Millisecond
