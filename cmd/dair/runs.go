package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/progress"
)

func newSubmitCmd(a *app) *cobra.Command {
	var (
		req   httpapi.SubmitRequest
		input string
		wait  bool
	)
	cmd := &cobra.Command{
		Use:   "submit PIPELINE",
		Short: "submit a run and print its shared run id",
		Long: "submit posts a run of PIPELINE. --input is JSON or @FILE. With --wait it follows the run's events,\n" +
			"shows step progress (and what a queued run waits for) and exits 0 only if the run succeeded. Ctrl-C\n" +
			"stops following, not the run: \"dair runs watch ID\" re-attaches.",
		Args: exactArgs("PIPELINE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Pipeline = args[0]
			if req.TenantID == "" && a.token == "" {
				return usagef("submit needs --tenant (or a --token carrying the tenant)")
			}
			for _, f := range []struct{ name, v string }{{"--idempotency-key", req.IdempotencyKey}, {"--correlation-id", req.CorrelationID}} {
				if !utf8.ValidString(f.v) {
					return usagef("%s is not valid UTF-8", f.name) // JSON would turn it into U+FFFD
				}
			}
			in, err := readInput(input)
			if err != nil {
				return err
			}
			req.Input = in
			c := a.client()
			sub, err := c.Submit(cmd.Context(), req)
			if err != nil {
				return err
			}
			if !wait {
				if a.jsonOut() {
					return a.printJSON(sub)
				}
				_, err := fmt.Fprintln(a.stdout, sub.SharedRunID)
				return err
			}
			return a.follow(cmd, c, sub.SharedRunID, true)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&req.TenantID, "tenant", "", "tenant id (with auth on, the token's tenant is used)")
	fs.StringVar(&input, "input", "", "run input: JSON, or @FILE to read it from a file")
	fs.BoolVar(&wait, "wait", false, "follow the run and exit 0 only if it succeeded")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "a repeated key of the same tenant returns the first run")
	fs.StringVar(&req.CorrelationID, "correlation-id", "", "correlation id carried by the run")
	return cmd
}

// readInput returns the --input value as JSON: empty, literal JSON or @FILE.
func readInput(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	if path, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if path == "-" {
			return nil, usagef("--input @- is not supported; give a file")
		}
		b, err = os.ReadFile(path)
		if err != nil {
			return nil, usagef("read input file: %v", err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("--input is not valid JSON")
	}
	return json.RawMessage(b), nil
}

// pipelineSteps returns the number of steps of a pipeline's latest version, 0 if unknown.
func pipelineSteps(cmd *cobra.Command, c *client.Client, key string) int {
	p, err := c.GetPipeline(cmd.Context(), key)
	if err != nil || p.Source == "" {
		return 0
	}
	parsed, err := dag.Parse([]byte(p.Source))
	if err != nil {
		return 0
	}
	return len(parsed.Steps)
}

// isTerminal reports whether w is a character device (a TTY).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newRunsCmd(a *app) *cobra.Command {
	cmd := group("runs", "run status and control")
	var watchGet bool
	get := &cobra.Command{
		Use:   "get ID",
		Short: "show a run and its steps",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if watchGet {
				return a.follow(cmd, a.client(), args[0], false)
			}
			run, err := a.client().GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printRun(run)
		},
	}
	get.Flags().BoolVarP(&watchGet, "watch", "w", false, "follow the run to its end, like runs watch")
	var q client.RunQuery
	list := &cobra.Command{
		Use:   "list",
		Short: "list runs, newest first",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Limit < 0 {
				return usagef("--limit must not be negative")
			}
			l, err := a.client().QueryRuns(cmd.Context(), q)
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			tw := a.table()
			fmt.Fprintln(tw, "ID\tTENANT\tPIPELINE\tSTATUS\tATTEMPTS\tINSTANCE\tCREATED")
			for _, r := range l.Runs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.SharedRunID, r.TenantID, r.Pipeline, r.Status,
					r.Attempts, dash(r.AssignedRuntimeInstanceID), fmtTime(r.CreatedAt))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&q.TenantID, "tenant", "", "only runs of this tenant")
	list.Flags().StringVar(&q.Status, "status", "", "only runs with this status")
	list.Flags().StringVar(&q.Pipeline, "pipeline", "", "only runs of this pipeline key")
	list.Flags().IntVar(&q.Limit, "limit", 0, "at most this many runs, newest first (0: the server's cap, 1000)")
	cmd.AddCommand(get, list, newRunsWatchCmd(a))
	for _, op := range []string{client.OpCancel, client.OpPause, client.OpResume} {
		cmd.AddCommand(&cobra.Command{
			Use:   op + " ID",
			Short: op + " a run",
			Args:  exactArgs("ID"),
			RunE: func(cmd *cobra.Command, args []string) error {
				run, err := a.client().ControlRun(cmd.Context(), args[0], op)
				if err != nil {
					return err
				}
				if a.jsonOut() {
					return a.printJSON(run)
				}
				_, err = fmt.Fprintf(a.stdout, "run %s %s\n", run.SharedRunID, run.Status)
				return err
			},
		})
	}
	return cmd
}

// printRun prints a run: JSON, or key/value lines and a step table.
func (a *app) printRun(r *httpapi.Run) error {
	if a.jsonOut() {
		return a.printJSON(r)
	}
	tw := a.table()
	for _, kv := range [][2]string{
		{"shared_run_id", r.SharedRunID}, {"tenant_id", r.TenantID}, {"pipeline", r.Pipeline},
		{"pipeline_hash", short(r.PipelineHash)}, {"status", r.Status}, {"waiting_reason", dash(r.WaitingReason)}, {"attempts", fmt.Sprint(r.Attempts)},
		{"instance", dash(r.AssignedRuntimeInstanceID)}, {"execution_id", dash(r.ExecutionID)},
		{"failure_reason", dash(r.FailureReason)}, {"created_at", fmtTime(r.CreatedAt)}, {"updated_at", fmtTime(r.UpdatedAt)},
		{"output", dash(string(r.Output))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	tw = a.table()
	fmt.Fprintln(tw, "STEP\tSTATUS\tATTEMPTS\tDURATION\tERROR")
	for _, s := range r.Steps {
		d := "-"
		if s.StartedAt != nil && s.FinishedAt != nil {
			d = progress.FormatDuration(s.FinishedAt.Sub(*s.StartedAt))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.ID, s.Status, s.Attempts, d, dash(oneLine(s.Error)))
	}
	return tw.Flush()
}

// dash returns s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// short abbreviates a hash.
func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return dash(s)
}

// fmtTime formats a time as RFC 3339 UTC, "-" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
