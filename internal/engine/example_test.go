package engine_test

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/engine"
)

// Example runs a two-step pipeline to its end, answering every effect at once as a shell
// would after its I/O.
func Example() {
	p, err := dag.Load([]byte(`
key: hello
steps:
  - {id: greet, uses: echo, with: {value: "hello {{ .input.name }}"}}
  - {id: shout, uses: echo, needs: [greet], with: {value: "{{ .steps.greet.output }}!"}}
`), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := dag.Compile(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	ix, err := engine.NewIndex(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := engine.New(engine.Config{Workers: 2})
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	events := []engine.Event{engine.Loaded{Index: ix, ExecutionID: "exec-1", Input: []byte(`{"name":"ada"}`)}}
	for len(events) > 0 {
		ev := events[0]
		events = events[1:]
		effects, err := m.Step(now, ev)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, e := range effects {
			switch e := e.(type) {
			case engine.Commit:
				fmt.Printf("commit %s %s\n", e.Record.StepId, e.Record.Status)
				events = append(events, engine.CommitDone{ID: e.ID, Result: engine.CommitOK})
			case engine.StartStep:
				fmt.Printf("start %s with %v\n", e.Step, e.With["value"])
				out := fmt.Sprintf("%q", e.With["value"])
				events = append(events, engine.AttemptSucceeded{Step: e.Step, Attempt: e.Attempt, Output: []byte(out)})
			case engine.Finalize:
				fmt.Printf("finalize %s %s\n", e.Status, e.Output)
				events = append(events, engine.FinalizeDone{Result: engine.FinalizeOK})
			case engine.Stop:
				fmt.Println("stop", e.Status)
			}
		}
	}
	// Output:
	// commit greet running
	// start greet with hello ada
	// commit greet succeeded
	// commit shout running
	// start shout with hello ada!
	// commit shout succeeded
	// finalize succeeded {"shout":"hello ada!"}
	// stop succeeded
}
