package dag

import "slices"

// ancestry answers "is u a transitive need of v" without storing ancestor sets. A direct need
// is a binary search in v's sorted needs. Anything else walks v's ancestors once, marking them
// with v's stamp in one array shared by every step; later questions about the same v read the
// marks. Memory is linear in the number of steps; time is linear for direct needs and one
// ancestor walk per step that references an indirect need.
//
// An ancestry is not safe for concurrent use; Validate makes one per call.
type ancestry struct {
	g     *Graph
	pos   map[string]int // step id -> index
	needs [][]int        // needs by index
	mark  []int          // mark[i] == stamp: step i is an ancestor of walked
	stamp int
	// walked is the step whose ancestors carry the current stamp, -1 before the first walk.
	walked int
	stack  []int
}

func newAncestry(g *Graph) *ancestry {
	a := &ancestry{g: g, pos: make(map[string]int, len(g.order)), walked: -1}
	for i, id := range g.order {
		a.pos[id] = i
	}
	a.needs = make([][]int, len(g.order))
	for i, id := range g.order {
		ns := g.needs[id]
		if len(ns) == 0 {
			continue
		}
		a.needs[i] = make([]int, len(ns))
		for j, n := range ns {
			a.needs[i][j] = a.pos[n]
		}
	}
	a.mark = make([]int, len(g.order))
	return a
}

// isAncestor reports whether step u is in step v's transitive needs. Unknown ids are not.
func (a *ancestry) isAncestor(u, v string) bool {
	if _, direct := slices.BinarySearch(a.g.needs[v], u); direct {
		return true
	}
	ui, ok := a.pos[u]
	vi, ok2 := a.pos[v]
	if !ok || !ok2 || a.g.level[u] >= a.g.level[v] {
		return false // an ancestor is always on a lower level
	}
	if a.walked != vi {
		a.walk(vi)
	}
	return a.mark[ui] == a.stamp
}

// walk marks every ancestor of step vi with a fresh stamp.
func (a *ancestry) walk(vi int) {
	a.stamp++
	a.walked = vi
	a.stack = append(a.stack[:0], a.needs[vi]...)
	for len(a.stack) > 0 {
		i := a.stack[len(a.stack)-1]
		a.stack = a.stack[:len(a.stack)-1]
		if a.mark[i] == a.stamp {
			continue
		}
		a.mark[i] = a.stamp
		for _, n := range a.needs[i] {
			if a.mark[n] != a.stamp {
				a.stack = append(a.stack, n)
			}
		}
	}
}
