package dag_test

import (
	"fmt"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/messages"
)

func Example() {
	doc := []byte(`
key: summarize-report
steps:
  - id: fetch
    uses: http
    with: {method: GET, url: "http://127.0.0.1:9000/doc"}
    retry: {max_attempts: 3, backoff: 200ms}
  - id: summarize
    uses: llm.chat
    needs: [fetch]
    with: {model: "m", prompt: "Summarize: {{ .steps.fetch.output.body }}"}
`)
	known := func(name string) bool { return name == "http" || name == "llm.chat" }
	p, err := dag.Load(doc, known)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := dag.Compile(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("order:", g.Order())

	// After a crash with fetch committed, resume starts summarize.
	plan := g.Resume(map[string]*messages.StepState{
		"fetch": {StepId: "fetch", Status: messages.StepSucceeded, Attempts: 1},
	}, nil)
	fmt.Println("ready:", plan.Ready)

	s, ok := p.Step("summarize")
	if !ok {
		return
	}
	with, err := dag.RenderWith(s.With, dag.Scope{Steps: map[string]any{"fetch": map[string]any{"body": "a long report"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("prompt:", with["prompt"])

	_, err = dag.Load([]byte("key: k\nsteps:\n  - {id: a, uses: http, needs: [b]}\n  - {id: b, uses: http, needs: [a]}\n"), known)
	fmt.Println(err)
	// Output:
	// order: [fetch summarize]
	// ready: [summarize]
	// prompt: Summarize: a long report
	// dag: cycle: a -> b -> a
}
