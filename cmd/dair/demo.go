package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/demo"
)

func newDemoCmd(a *app) *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "run a self-contained tour: three tenants, live progress, a crash and restart, a replay",
		Long: "demo starts an in-process node on the embedded store, a stand-in OpenAI-compatible model server and a\n" +
			"flaky HTTP endpoint (all on 127.0.0.1; no other process or API key needed), runs the example pipelines for\n" +
			"three tenants, simulates a crash mid-run (closes the store under the running node, then stops it in\n" +
			"process) and starts a new node on the same store, replays an execution and prints a summary.\n" +
			"It exits 0 only if every run succeeded, every interrupted run resumed without running a committed\n" +
			"step again, and the replay did not diverge. With -o json (or yaml) the report goes to stderr and stdout\n" +
			"gets {ok, error, runs: [...]}.",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = a.stdout
			if !a.jsonOut() {
				return demo.Run(cmd.Context(), o)
			}
			// The narrated report goes to stderr, the outcome to stdout.
			var res demo.Result
			o.Out, o.Result = a.stderr, &res
			err := demo.Run(cmd.Context(), o)
			if perr := a.printJSON(res); perr != nil {
				return errors.Join(err, perr)
			}
			if err != nil {
				return &quietError{msg: err.Error()}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.DataDir, "data", "", "data directory of the embedded store (default: a temporary directory, removed at the end)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary data directory and print its path")
	return cmd
}
