package dag

import "sort"

// compile builds p's Graph in time linear in the number of steps and needs (plus sorting the
// ids): Kahn's algorithm yields the levels and detects a cycle; only then does findCycle
// search for the cycle to report.
func compile(p *Pipeline) (*Graph, error) {
	exists := make(map[string]bool, len(p.Steps))
	for i := range p.Steps {
		if err := checkID(i, p.Steps[i].ID, exists); err != nil {
			return nil, err
		}
	}
	if err := checkNeeds(p, exists); err != nil {
		return nil, err
	}
	n := len(p.Steps)
	g := &Graph{
		pipeline:   p,
		level:      make(map[string]int, n),
		needs:      make(map[string][]string, n),
		dependents: make(map[string][]string, n),
	}
	ids := make([]string, 0, n)
	for i := range p.Steps {
		s := &p.Steps[i]
		ids = append(ids, s.ID)
		g.needs[s.ID] = dedupeSorted(s.Needs)
	}
	sort.Strings(ids)
	// Walking the needs in id order appends every dependents list already sorted.
	for _, id := range ids {
		for _, n := range g.needs[id] {
			g.dependents[n] = append(g.dependents[n], id)
		}
	}
	levels, ok := g.levels(ids)
	if !ok {
		c := findCycle(ids, g.needs)
		return nil, &ValidationError{Kind: KindCycle, StepID: c[0], Path: c}
	}
	// Bucket the sorted ids by level: the order is (level, id) without a comparison sort.
	buckets := make([][]string, 0, 8)
	for _, id := range ids {
		l := levels[id]
		g.level[id] = l
		for len(buckets) <= l {
			buckets = append(buckets, nil)
		}
		buckets[l] = append(buckets[l], id)
	}
	g.order = make([]string, 0, n)
	for _, b := range buckets {
		g.order = append(g.order, b...)
	}
	return g, nil
}

// levels computes every step's level with Kahn's algorithm over g.needs and g.dependents. It
// reports false when some step is on or behind a cycle.
func (g *Graph) levels(ids []string) (map[string]int, bool) {
	pending := make(map[string]int, len(ids)) // needs not yet placed
	level := make(map[string]int, len(ids))
	queue := make([]string, 0, len(ids))
	for _, id := range ids {
		if k := len(g.needs[id]); k > 0 {
			pending[id] = k
			continue
		}
		level[id] = 0
		queue = append(queue, id)
	}
	for head := 0; head < len(queue); head++ {
		u := queue[head]
		for _, d := range g.dependents[u] {
			if l := level[u] + 1; l > level[d] {
				level[d] = l
			}
			pending[d]--
			if pending[d] == 0 {
				queue = append(queue, d)
			}
		}
	}
	return level, len(queue) == len(ids)
}
