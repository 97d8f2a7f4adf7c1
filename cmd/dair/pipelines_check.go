package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/dag"
)

// readPipelineFile reads and checks a pipeline document locally (shape and rules, without
// the node's handler list), so a file without a key or with a cycle is bad input (exit 2)
// before any request.
func readPipelineFile(path string) ([]byte, *dag.Pipeline, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usagef("read pipeline file: %v", err)
	}
	p, err := dag.Load(src, nil)
	if err != nil {
		return nil, nil, usagef("%s: %v", path, err)
	}
	return src, p, nil
}

func newPipelinesCheckCmd(a *app) *cobra.Command {
	var last int
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "replay recent executions of FILE's key against FILE; exits 1 if any would diverge",
		Long: "check sends FILE to the node, which replays the --last most recent executions of its key against it\n" +
			"(without storing it or calling any handler) and reports, per execution, where it would diverge: a step\n" +
			"added, removed or reordered, another handler, a changed `with`, an input the new input_schema refuses.\n" +
			"It exits 0 when every checked execution is compatible and 1 otherwise.",
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if last < 1 {
				return usagef("--last must be at least 1")
			}
			src, p, err := readPipelineFile(args[0])
			if err != nil {
				return err
			}
			res, err := a.client().CheckPipeline(cmd.Context(), p.Key, src, last)
			if err != nil {
				return err
			}
			if a.jsonOut() {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else if len(res.Divergent) == 0 {
				_, err := fmt.Fprintf(a.stdout, "pipeline %s: %d recent execution(s) checked, none would diverge\n", res.Key, res.Checked)
				return err
			} else {
				tw := a.table()
				fmt.Fprintln(tw, "EXECUTION\tSTEP\tREASON")
				execs := map[string]bool{}
				for _, d := range res.Divergent {
					execs[d.ExecutionID] = true
					fmt.Fprintf(tw, "%s\t%s\t%s\n", d.ExecutionID, dash(d.StepID), oneLine(d.Reason))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "pipeline %s: %d of %d recent execution(s) would diverge\n", res.Key, len(execs), res.Checked)
			}
			if len(res.Divergent) > 0 {
				return &quietError{msg: "pipeline check: divergence"}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&last, "last", 100, "how many of the most recent executions of the key to replay")
	return cmd
}
