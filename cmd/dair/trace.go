package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/tracetree"
)

// newTraceCmd is "dair executions trace ID": the trace as a tree, or a flat table.
func newTraceCmd(a *app) *cobra.Command {
	var flatTrace bool
	trace := &cobra.Command{
		Use:   "trace ID",
		Short: "print an execution's trace as a tree: steps with their attempts, and control-plane events",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tr, err := a.client().Trace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(tr)
			}
			if !flatTrace {
				return tracetree.Render(a.stdout, tr.Spans)
			}
			tw := a.table()
			fmt.Fprintln(tw, "NAME\tKIND\tSTART\tDURATION")
			for _, s := range tr.Spans {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Kind, s.Start.UTC().Format("15:04:05.000"), s.End.Sub(s.Start))
			}
			return tw.Flush()
		},
	}
	trace.Flags().BoolVar(&flatTrace, "flat", false, "print the spans as a flat table instead of a tree")
	return trace
}
