package engine

// readyQueue holds the positions of the steps that may start now, smallest first: positions
// follow the graph's order (level, then id), so popping gives dag.Graph.Ready's order.
type readyQueue []int32

func (q *readyQueue) push(i int32) {
	*q = append(*q, i)
	h := *q
	for c := len(h) - 1; c > 0; {
		p := (c - 1) / 2
		if h[p] <= h[c] {
			break
		}
		h[p], h[c] = h[c], h[p]
		c = p
	}
}

func (q *readyQueue) pop() int32 {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for p := 0; ; {
		c := 2*p + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if h[p] <= h[c] {
			break
		}
		h[p], h[c] = h[c], h[p]
		p = c
	}
	*q = h
	return top
}
