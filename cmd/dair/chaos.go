package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/chaos"
)

func newChaosCmd(a *app) *cobra.Command {
	cfg := chaos.DefaultConfig()
	var faults string
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "run a local cluster under injected faults and check that no run is lost or committed twice",
		Long: "chaos starts a private redis-server (or uses --store) and --nodes `dair node` processes on loopback, submits\n" +
			"--runs multi-step runs for four tenants (dedicated, hybrid, two shared) over --duration while it injects the\n" +
			"faults of a seeded schedule (kill -9 and restart of a node, SIGSTOP/SIGCONT, Redis killed and restarted,\n" +
			"a membership partition), waits for the runs, then checks: every acknowledged run succeeded, no step committed\n" +
			"twice or run again after its commit, no stale-epoch write, each run kept its execution id, usage equals the\n" +
			"ledger, reservations drained; and reports recovery times per fault kind. It exits 0 only if every property held.",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("faults") {
				fs, err := chaos.ParseFaults(faults)
				if err != nil {
					return usagef("%v", err)
				}
				cfg.Faults = fs
			} else if cfg.StoreURL != "" {
				cfg.Faults = nil // the default without redis-restart
			}
			if err := cfg.Validate(); err != nil {
				return usagef("%v", err)
			}
			cfg.Progress = a.stderr
			rep, err := chaos.Run(cmd.Context(), cfg)
			if errors.Is(err, chaos.ErrBadConfig) {
				return usagef("%v", err)
			}
			if err != nil {
				return err
			}
			if a.jsonOut() {
				err = a.printJSON(rep)
			} else {
				err = rep.Print(a.stdout)
			}
			if err != nil {
				return err
			}
			if !rep.Passed {
				return &quietError{msg: "chaos: a property failed"}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "number of dair node processes")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "number of runs submitted over the fault window")
	fs.StringVar(&faults, "faults", "kill,pause,redis-restart,partition", "faults to inject: kill, pause, redis-restart, partition (comma-separated), or none")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "fault window (runs are submitted over its first 80%)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule and workload (0: drawn from the clock and printed)")
	fs.StringVar(&cfg.StoreURL, "store", "", "existing Redis to run on, redis://HOST:PORT/DB (default: a private redis-server; no redis-restart then)")
	fs.StringVar(&cfg.Profile, "cluster-profile", cfg.Profile, "the nodes' failure detection: local or lan")
	fs.DurationVar(&cfg.FinishTimeout, "finish-timeout", cfg.FinishTimeout, "how long the runs may take to finish after the fault window")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", cfg.SettleTimeout, "how long usage and reservations may take to settle after the runs finished")
	fs.StringVar(&cfg.LogDir, "logs", "", "directory for the node and Redis logs (default: a temporary one, removed when every property held)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary log directory even when every property held")
	fs.DurationVar(&cfg.ProgressEvery, "progress-every", 10*time.Second, "period of the progress summary on stderr")
	return cmd
}
