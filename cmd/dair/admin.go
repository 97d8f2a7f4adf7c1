package main

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

func newInstancesCmd(a *app) *cobra.Command {
	cmd := group("instances", "runtime instances and their capacity")
	var tenant string
	list := &cobra.Command{
		Use:   "list",
		Short: "list runtime instances and their capacity",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.client().ListInstances(cmd.Context(), tenant)
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			return a.printInstances(l.Instances, a.clusterMode(cmd.Context()))
		},
	}
	list.Flags().StringVar(&tenant, "tenant", "", "only instances visible to this tenant")
	cmd.AddCommand(list)
	for _, op := range []string{client.OpPause, client.OpResume, client.OpDrain} {
		cmd.AddCommand(&cobra.Command{
			Use:   op + " ID",
			Short: op + " an instance's queue",
			Args:  exactArgs("ID"),
			RunE: func(cmd *cobra.Command, args []string) error {
				in, err := a.client().ControlInstance(cmd.Context(), args[0], op)
				if err != nil {
					return err
				}
				if a.jsonOut() {
					return a.printJSON(in)
				}
				_, err = fmt.Fprintf(a.stdout, "instance %s %s paused=%t draining=%t\n", in.RuntimeInstanceID, in.Status,
					in.IsQueuePaused, in.IsDraining)
				return err
			},
		})
	}
	return cmd
}

// newTenantsPutCmd is "tenants put TENANT" with one flag per tenant setting. It changes only
// the settings whose flags are given: the others keep their stored values (a new tenant starts
// from the defaults, shared unless --isolation says otherwise; see mergeTenant for a change of
// isolation).
func newTenantsPutCmd(a *app) *cobra.Command {
	var t httpapi.Tenant
	put := &cobra.Command{
		Use:   "put TENANT",
		Short: "create a tenant, or change the settings given as flags (the others are kept)",
		Args:  exactArgs("TENANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			if fs.Changed("isolation") {
				switch t.IsolationMode {
				case messages.IsolationShared, messages.IsolationDedicated, messages.IsolationHybrid:
				default:
					return usagef("unknown isolation %q (want shared, dedicated or hybrid)", t.IsolationMode)
				}
			}
			if math.IsNaN(t.RunsPerSecond) || math.IsInf(t.RunsPerSecond, 0) {
				return usagef("--runs-per-second must be a finite number, got %v", t.RunsPerSecond)
			}
			c := a.client()
			cur, err := c.GetTenant(cmd.Context(), args[0])
			var ce *client.Error
			switch {
			case errors.As(err, &ce) && ce.Status == http.StatusNotFound && ce.Code == "not_found":
				cur = &httpapi.Tenant{IsolationMode: messages.IsolationShared}
			case err != nil:
				return err
			}
			next := mergeTenant(*cur, t, fs.Changed)
			next.TenantID = args[0]
			out, err := c.PutTenant(cmd.Context(), next)
			if err != nil {
				return err
			}
			return a.printTenants([]httpapi.Tenant{*out}, false)
		},
	}
	fs := put.Flags()
	fs.StringVar(&t.IsolationMode, "isolation", "", "isolation mode: shared, dedicated or hybrid (a new tenant: shared)")
	fs.StringVar(&t.TenantGroupID, "tenant-group-id", "", "tenant group")
	fs.BoolVar(&t.PreferDedicatedCapacity, "prefer-dedicated-capacity", false, "hybrid: prefer dedicated instances")
	fs.BoolVar(&t.AllowSharedFallback, "allow-shared-fallback", false, "hybrid: fall back to shared instances")
	fs.StringVar(&t.RuntimeInstanceIDPrefix, "runtime-instance-id-prefix", "", "prefix of the tenant's instance ids")
	fs.Int32Var(&t.MaxRuntimeInstances, "max-runtime-instances", 0, "most dedicated instances (0: default)")
	fs.Int32Var(&t.WorkerCountPerInstance, "worker-count-per-instance", 0, "workers per instance (0: default)")
	fs.Int32Var(&t.MaxConcurrentRunsPerInstance, "max-concurrent-runs-per-instance", 0, "run slots per instance (0: default)")
	fs.Int32Var(&t.LocalQueueCapacity, "local-queue-capacity", 0, "instance queue capacity (0: default)")
	fs.Int32Var(&t.MaxLocalWorkersPerExecution, "max-local-workers-per-execution", 0, "parallel steps per execution (0: default)")
	fs.BoolVar(&t.Suspended, "suspended", false, "store the tenant suspended (--suspended=false: not suspended)")
	fairFlags(fs, &t)
	return put
}

// mergeTenant is cur with the settings of flags whose flag changed reports given. A change of
// isolation mode starts the capacity settings not given from the new mode's defaults (a
// dedicated tenant's instance prefix may not be the shared one's); the group, suspension, fair
// share and quotas are kept.
func mergeTenant(cur, flags httpapi.Tenant, changed func(name string) bool) httpapi.Tenant {
	if changed("isolation") && flags.IsolationMode != cur.IsolationMode {
		cur.PreferDedicatedCapacity, cur.AllowSharedFallback, cur.RuntimeInstanceIDPrefix = false, false, ""
		cur.MaxRuntimeInstances, cur.WorkerCountPerInstance, cur.MaxConcurrentRunsPerInstance = 0, 0, 0
		cur.LocalQueueCapacity, cur.MaxLocalWorkersPerExecution = 0, 0
	}
	for _, f := range []struct {
		name string
		set  func()
	}{
		{"isolation", func() { cur.IsolationMode = flags.IsolationMode }},
		{"tenant-group-id", func() { cur.TenantGroupID = flags.TenantGroupID }},
		{"prefer-dedicated-capacity", func() { cur.PreferDedicatedCapacity = flags.PreferDedicatedCapacity }},
		{"allow-shared-fallback", func() { cur.AllowSharedFallback = flags.AllowSharedFallback }},
		{"runtime-instance-id-prefix", func() { cur.RuntimeInstanceIDPrefix = flags.RuntimeInstanceIDPrefix }},
		{"max-runtime-instances", func() { cur.MaxRuntimeInstances = flags.MaxRuntimeInstances }},
		{"worker-count-per-instance", func() { cur.WorkerCountPerInstance = flags.WorkerCountPerInstance }},
		{"max-concurrent-runs-per-instance", func() { cur.MaxConcurrentRunsPerInstance = flags.MaxConcurrentRunsPerInstance }},
		{"local-queue-capacity", func() { cur.LocalQueueCapacity = flags.LocalQueueCapacity }},
		{"max-local-workers-per-execution", func() { cur.MaxLocalWorkersPerExecution = flags.MaxLocalWorkersPerExecution }},
		{"suspended", func() { cur.Suspended = flags.Suspended }},
		{"weight", func() { cur.Weight = flags.Weight }},
		{"max-concurrent-runs", func() { cur.MaxConcurrentRuns = flags.MaxConcurrentRuns }},
		{"max-queued-runs", func() { cur.MaxQueuedRuns = flags.MaxQueuedRuns }},
		{"runs-per-second", func() {
			cur.RunsPerSecond = flags.RunsPerSecond
			if flags.RunsPerSecond == 0 && !changed("runs-burst") {
				cur.RunsBurst = 0 // no rate, no burst: clearing the limit clears it whole
			}
		}},
		{"runs-burst", func() { cur.RunsBurst = flags.RunsBurst }},
	} {
		if changed(f.name) {
			f.set()
		}
	}
	return cur
}

func newTenantsCmd(a *app) *cobra.Command {
	cmd := group("tenants", "tenant settings")
	put := newTenantsPutCmd(a)
	get := &cobra.Command{
		Use:   "get TENANT",
		Short: "show a tenant's settings",
		Args:  exactArgs("TENANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := a.client().GetTenant(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printTenants([]httpapi.Tenant{*out}, false)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "list tenants",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.client().ListTenants(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			return a.printTenants(l.Tenants, true)
		},
	}
	cmd.AddCommand(put, get, list)
	for _, op := range []string{"suspend", "resume"} {
		cmd.AddCommand(&cobra.Command{
			Use:   op + " TENANT",
			Short: op + " a tenant",
			Args:  exactArgs("TENANT"),
			RunE: func(cmd *cobra.Command, args []string) error {
				out, err := a.client().ControlTenant(cmd.Context(), args[0], op)
				if err != nil {
					return err
				}
				return a.printTenants([]httpapi.Tenant{*out}, false)
			},
		})
	}
	return cmd
}

// printTenants prints tenants as a table (or one tenant's JSON unless list).
func (a *app) printTenants(ts []httpapi.Tenant, list bool) error {
	if a.jsonOut() && !list && len(ts) == 1 {
		return a.printJSON(ts[0])
	}
	tw := a.table()
	fmt.Fprintln(tw, "TENANT\tGROUP\tISOLATION\tPREFER_DEDICATED\tSHARED_FALLBACK\tPREFIX\tMAX_INSTANCES\tWORKERS\tRUNS/INSTANCE\tQUEUE\tSUSPENDED\tWEIGHT\tMAX_RUNS\tMAX_QUEUED\tRUNS/S")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%t\t%s\t%d\t%d\t%d\t%d\t%t\t%d\t%s\t%s\t%s\n", t.TenantID, dash(t.TenantGroupID), t.IsolationMode,
			t.PreferDedicatedCapacity, t.AllowSharedFallback, dash(t.RuntimeInstanceIDPrefix), t.MaxRuntimeInstances,
			t.WorkerCountPerInstance, t.MaxConcurrentRunsPerInstance, t.LocalQueueCapacity, t.Suspended,
			t.Weight, limit(float64(t.MaxConcurrentRuns)), limit(float64(t.MaxQueuedRuns)), limit(t.RunsPerSecond))
	}
	return tw.Flush()
}

func newExecutionsCmd(a *app) *cobra.Command {
	cmd := group("executions", "durable history of executions")
	ledger := &cobra.Command{
		Use:   "ledger ID",
		Short: "print an execution's ledger",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := a.client().Ledger(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			tw := a.table()
			fmt.Fprintln(tw, "SEQ\tAT\tKIND\tSTEP\tATTEMPT\tINSTANCE\tREASON")
			for _, e := range l.Entries {
				attempt := "-"
				if e.Attempt > 0 {
					attempt = fmt.Sprint(e.Attempt)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.UTC().Format("15:04:05.000"), e.Kind, dash(e.StepID),
					attempt, dash(e.RuntimeInstanceID), dash(oneLine(e.Reason)))
			}
			return tw.Flush()
		},
	}
	trace := newTraceCmd(a)
	replay := &cobra.Command{
		Use:   "replay ID",
		Short: "replay an execution against its history; exits 1 on divergence",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.client().Replay(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut() {
				if err := a.printJSON(r); err != nil {
					return err
				}
			} else {
				if !r.Diverged {
					_, err := fmt.Fprintf(a.stdout, "execution %s replayed: no divergence\n", r.ExecutionID)
					return err
				}
				fmt.Fprintf(a.stdout, "execution %s diverged:\n", r.ExecutionID)
				for _, d := range r.Divergences {
					fmt.Fprintf(a.stdout, "  step %s: %s\n", dash(d.StepID), d.Reason)
				}
			}
			if r.Diverged {
				return &quietError{msg: "replay diverged"}
			}
			return nil
		},
	}
	cmd.AddCommand(ledger, trace, replay)
	return cmd
}

func newPipelinesCmd(a *app) *cobra.Command {
	cmd := group("pipelines", "pipeline definitions")
	put := &cobra.Command{
		Use:   "put FILE",
		Short: "store a pipeline definition (YAML or JSON)",
		Args:  exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, p, err := readPipelineFile(args[0])
			if err != nil {
				return err
			}
			out, err := a.client().PutPipeline(cmd.Context(), p.Key, src)
			if err != nil {
				return err
			}
			for _, w := range out.Warnings {
				fmt.Fprintf(a.stderr, "dair: warning: %s\n", w)
			}
			if a.jsonOut() {
				return a.printJSON(out)
			}
			_, err = fmt.Fprintf(a.stdout, "pipeline %s stored (hash %s)\n", out.Key, short(out.Hash))
			return err
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "list pipelines",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.client().ListPipelines(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			tw := a.table()
			fmt.Fprintln(tw, "KEY\tHASH\tSTEPS\tINPUT_SCHEMA\tCREATED\tDESCRIPTION")
			for _, p := range l.Pipelines {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%t\t%s\t%s\n", p.Key, short(p.Hash), p.Steps, len(p.InputSchema) > 0,
					fmtTime(p.CreatedAt), dash(oneLine(p.Description)))
			}
			return tw.Flush()
		},
	}
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "print a pipeline's latest definition",
		Args:  exactArgs("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.client().GetPipeline(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(p)
			}
			_, err = fmt.Fprintf(a.stdout, "# %s hash %s\n%s", p.Key, p.Hash, p.Source)
			return err
		},
	}
	cmd.AddCommand(put, list, get, newPipelinesCheckCmd(a))
	return cmd
}

func newQueueCmd(a *app) *cobra.Command {
	cmd := group("queue", "the shared queue")
	cmd.AddCommand(&cobra.Command{
		Use:   "drain",
		Short: "run one manual shared-queue drain cycle",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.client().DrainQueue(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(d)
			}
			_, err = fmt.Fprintf(a.stdout, "claimed %d\n", d.Claimed)
			return err
		},
	})
	return cmd
}

// limit prints a quota, "-" when it is 0 (unlimited).
func limit(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// fairFlags adds the fair-share and quota flags of tenants put.
func fairFlags(fs *pflag.FlagSet, t *httpapi.Tenant) {
	fs.Int32Var(&t.Weight, "weight", 0, "fair share of contended shared capacity (0: default 1)")
	fs.Int32Var(&t.MaxConcurrentRuns, "max-concurrent-runs", 0, "dispatched and running runs across all instances (0: unlimited)")
	fs.Int32Var(&t.MaxQueuedRuns, "max-queued-runs", 0, "queued runs; a submit beyond it is refused with 429 (0: unlimited)")
	fs.Var((*rateValue)(&t.RunsPerSecond), "runs-per-second", "dispatch rate limit (0: unlimited; 0 also clears a --runs-burst not given)")
	fs.Int32Var(&t.RunsBurst, "runs-burst", 0, "dispatch rate burst (0: ceil of --runs-per-second)")
}

// rateValue is the --runs-per-second flag: a float64 that refuses a positive value too small
// for a float64 (1e-400 parses as 0 without an error, and 0 means no limit at all).
type rateValue float64

func (v *rateValue) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *rateValue) Type() string   { return "float" }

func (v *rateValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("want a number, got %q", s)
	}
	if m, _, _ := strings.Cut(strings.ToLower(s), "e"); f == 0 && strings.ContainsAny(m, "123456789") {
		return fmt.Errorf("%s is too small for a 64-bit float: it would be 0, which means no limit", s)
	}
	*v = rateValue(f)
	return nil
}
