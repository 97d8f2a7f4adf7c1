package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/client"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3".
var version = ""

// Output formats of -o.
const (
	outTable = "table"
	outJSON  = "json"
	outYAML  = "yaml"
)

// app holds the global flags and the process streams shared by every command.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	server string
	token  string
	output string
}

// checkServer normalizes --server (a bare HOST:PORT gets http://) when the command line or
// DAIR_SERVER set it; an unusable address is bad usage.
func (a *app) checkServer(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("server"); (f == nil || !f.Changed) && os.Getenv("DAIR_SERVER") == "" {
		return nil
	}
	u, err := client.NormalizeBaseURL(a.server)
	if err != nil {
		return usagef("--server: %v", err)
	}
	a.server = u
	return nil
}

// client returns an API client for the --server and --token flags.
func (a *app) client() *client.Client { return client.New(a.server, a.token) }

// jsonOut reports whether a machine-readable format was asked for (-o json or -o yaml).
func (a *app) jsonOut() bool { return a.output == outJSON || a.output == outYAML }

// printJSON writes v to stdout as indented JSON, or as YAML with -o yaml (the same fields
// and order as the JSON).
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	if a.output == outYAML {
		y, err := jsonToYAML(b)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(y)
		return err
	}
	_, err = fmt.Fprintln(a.stdout, string(b))
	return err
}

// table returns a tabwriter on stdout; the caller calls Flush.
func (a *app) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// versionString returns the linked version, the module version, or "dev".
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// newRootCmd builds the whole command tree.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "dair",
		Short:         "dair runs durable multi-tenant AI pipelines",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionString(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.output != outTable && a.output != outJSON && a.output != outYAML {
				return usagef("unknown output format %q (want table, json or yaml)", a.output)
			}
			return a.checkServer(cmd)
		},
	}
	root.SetVersionTemplate("dair {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", envOr("DAIR_SERVER", "http://127.0.0.1:8080"), "dair node URL (env DAIR_SERVER)")
	pf.StringVar(&a.token, "token", os.Getenv("DAIR_TOKEN"), "bearer token (env DAIR_TOKEN)")
	pf.StringVarP(&a.output, "output", "o", outTable, "output format: table, json or yaml")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })

	root.AddCommand(
		newVersionCmd(a), newDevCmd(a), newNodeCmd(a), newSubmitCmd(a), newRunsCmd(a), newInstancesCmd(a),
		newTenantsCmd(a), newExecutionsCmd(a), newPipelinesCmd(a), newQueueCmd(a), newTokenCmd(a), newMCPCmd(a),
		newDemoCmd(a), newChaosCmd(a), newAgentsCmd(a),
	)
	root.AddCommand(newClusterCmd(a), newStandinCmd(a))
	wireCompletion(a, root)
	wrapRunE(root)
	return root
}

// group returns a parent command that only holds subcommands; run alone or with an unknown
// subcommand it is bad usage.
func group(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return usagef("%s needs a subcommand (see %s --help)", cmd.CommandPath(), cmd.CommandPath())
		},
	}
}

// exactArgs is cobra.ExactArgs with the argument names in the message.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s takes %d argument(s) (%v), got %d", cmd.CommandPath(), len(names), names, len(args))
		}
		for i, a := range args {
			if a == "" {
				return usagef("%s: the argument %s is empty", cmd.CommandPath(), names[i])
			}
		}
		return nil
	}
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  exactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if a.jsonOut() {
				return a.printJSON(map[string]string{"version": versionString()})
			}
			_, err := fmt.Fprintf(a.stdout, "dair %s\n", versionString())
			return err
		},
	}
}
