package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/dag"
)

// drive runs a Machine to its end, answering every effect at once: commits succeed, attempts
// succeed. It returns how many attempts it started.
func drive(tb testing.TB, ix *Index, workers int) int {
	m := New(Config{Workers: workers})
	now := time.Unix(0, 0)
	queue := []Event{Loaded{Index: ix, ExecutionID: "e"}}
	starts := 0
	for len(queue) > 0 {
		ev := queue[0]
		queue = queue[1:]
		effs, err := m.Step(now, ev)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range effs {
			switch f := e.(type) {
			case StartStep:
				starts++
				queue = append(queue, AttemptSucceeded{Step: f.Step, Attempt: f.Attempt, Output: []byte(`{"n":1}`)})
			case Commit:
				queue = append(queue, CommitDone{ID: f.ID})
			case Finalize:
				queue = append(queue, FinalizeDone{})
			}
		}
	}
	if !m.Stopped() || m.Status() != RunSucceeded {
		tb.Fatalf("run ended %v (stopped %v)", m.Status(), m.Stopped())
	}
	return starts
}

// chainIndex is n steps in a chain with a constant `with`, or (templated) a `with` that reads
// the predecessor's output. The pipeline is built in Go and compiled without dag.Validate,
// whose checks are not what is measured.
func chainIndex(tb testing.TB, n int, templated bool) *Index {
	p := &dag.Pipeline{Key: "chain", Steps: make([]dag.Step, n)}
	for i := range p.Steps {
		p.Steps[i] = dag.Step{ID: fmt.Sprintf("s%05d", i), Uses: "echo", With: map[string]any{"value": "x"}}
		if i > 0 {
			prev := fmt.Sprintf("s%05d", i-1)
			p.Steps[i].Needs = []string{prev}
			if templated {
				p.Steps[i].With = map[string]any{"value": "{{ .steps." + prev + ".output.n }}"}
			}
		}
	}
	return compileIndex(tb, p)
}

// wideIndex is a root, n-2 steps that need it, and a sink that needs them all.
func wideIndex(tb testing.TB, n int) *Index {
	p := &dag.Pipeline{Key: "wide", Steps: []dag.Step{{ID: "root", Uses: "echo"}}}
	sink := dag.Step{ID: "sink", Uses: "echo"}
	for i := 0; i < n-2; i++ {
		id := fmt.Sprintf("w%05d", i)
		p.Steps = append(p.Steps, dag.Step{ID: id, Uses: "echo", Needs: []string{"root"}})
		sink.Needs = append(sink.Needs, id)
	}
	p.Steps = append(p.Steps, sink)
	return compileIndex(tb, p)
}

func compileIndex(tb testing.TB, p *dag.Pipeline) *Index {
	g, err := dag.Compile(p)
	if err != nil {
		tb.Fatal(err)
	}
	ix, err := NewIndex(g)
	if err != nil {
		tb.Fatal(err)
	}
	return ix
}

// BenchmarkMachine_chain10k runs a 10,000-step chain through the engine alone (no I/O): one
// op is one whole run, 40,000 events.
func BenchmarkMachine_chain10k(b *testing.B) {
	ix := chainIndex(b, 10000, false)
	for b.Loop() {
		if n := drive(b, ix, 4); n != 10000 {
			b.Fatalf("%d starts", n)
		}
	}
}

// BenchmarkMachine_chain10kTemplated is BenchmarkMachine_chain10k with a template per step
// that reads the step before: dag.RenderWith (which parses each template at every call) is
// most of its cost.
func BenchmarkMachine_chain10kTemplated(b *testing.B) {
	ix := chainIndex(b, 10000, true)
	for b.Loop() {
		if n := drive(b, ix, 4); n != 10000 {
			b.Fatalf("%d starts", n)
		}
	}
}

// BenchmarkMachine_wide10k runs a 10,000-step fan-out and fan-in with 64 workers.
func BenchmarkMachine_wide10k(b *testing.B) {
	ix := wideIndex(b, 10000)
	for b.Loop() {
		if n := drive(b, ix, 64); n != 10000 {
			b.Fatalf("%d starts", n)
		}
	}
}

// TestMachine_chainWorkIsLinear guards the complexity without timing: the allocations per
// step of a templated chain must not grow with its length, as they would if every start
// rendered over every output so far (or rescanned the graph into new slices).
func TestMachine_chainWorkIsLinear(t *testing.T) {
	perStep := func(n int) float64 {
		ix := chainIndex(t, n, true)
		return testing.AllocsPerRun(1, func() { drive(t, ix, 1) }) / float64(n)
	}
	small, large := perStep(500), perStep(4000)
	if large > small*1.2 {
		t.Fatalf("allocations per step grow with the chain: %.1f at 500 steps, %.1f at 4000", small, large)
	}
}
