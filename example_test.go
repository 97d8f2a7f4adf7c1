package dair_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dairuntime/dair"
)

// Start a node on the embedded store, register a handler and a pipeline, submit a run and
// await its result.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dair-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Deferred calls run last first: stop the node, close the store, remove the directory.
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Println("remove dir:", err)
		}
	}()
	st, err := dair.OpenStore(ctx, "bolt://"+filepath.Join(dir, "dair.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println("close store:", err)
		}
	}()
	node, err := dair.Start(ctx, dair.Config{Store: st})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := node.Stop(ctx); err != nil {
			fmt.Println("stop node:", err)
		}
	}()

	upper := dair.HandlerFunc(func(ctx context.Context, r *dair.Request) (dair.Result, error) {
		return dair.Result{Output: strings.ToUpper(fmt.Sprint(r.With["text"]))}, nil
	})
	if err := node.Handlers().Register("upper", upper); err != nil {
		fmt.Println(err)
		return
	}
	pipeline := `
key: shout
steps:
  - id: greet
    uses: echo
    with: {value: "hello {{ .input.name }}"}
  - id: shout
    uses: upper
    needs: [greet]
    with: {text: "{{ .steps.greet.output }}"}
`
	if _, err := node.PutPipeline(ctx, []byte(pipeline)); err != nil {
		fmt.Println(err)
		return
	}
	run, err := node.Submit(ctx, dair.SubmitRequest{Pipeline: "shout", Input: []byte(`{"name":"ada"}`), Snapshot: dair.Tenant("acme")})
	if err != nil {
		fmt.Println(err)
		return
	}
	done, err := node.Await(ctx, run.SharedRunId)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(done.Status, string(done.Output))
	// Output: succeeded {"shout":"HELLO ADA"}
}
