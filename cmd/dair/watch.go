package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/internal/progress"
	"github.com/dairuntime/dair/messages"
)

// tickEvery is how often the progress display's elapsed times move.
const tickEvery = 500 * time.Millisecond

func newRunsWatchCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "watch ID",
		Short: "follow a run to its end with live progress; exit 0 only if it succeeded",
		Long: "watch follows any run, from its start, with the progress display of submit --wait: one line per\n" +
			"finished step and what a queued or scaling-out run waits for, with elapsed times. It exits 0 only if the\n" +
			"run succeeded. Ctrl-C stops watching, not the run.",
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.follow(cmd, a.client(), args[0], false)
		},
	}
}

// follow streams a run's progress and prints the final summary; it fails (exit 1) unless
// the run succeeded. submitted says the command just created the run. When ctx ends (Ctrl-C)
// it says the run goes on and how to re-attach.
func (a *app) follow(cmd *cobra.Command, c *client.Client, runID string, submitted bool) error {
	ctx := cmd.Context()
	progOut, live := a.stdout, isTerminal(a.stdout)
	if a.jsonOut() {
		progOut, live = a.stderr, false
	}
	total := 0
	run, err := c.GetRun(ctx, runID)
	if err != nil {
		return a.detached(ctx, runID, err)
	}
	total = pipelineSteps(cmd, c, run.Pipeline)
	if !a.jsonOut() {
		verb := "submitted"
		if !submitted {
			verb = "(" + run.Status + ")"
		}
		if _, err := fmt.Fprintf(a.stdout, "run %s %s\n", run.SharedRunID, verb); err != nil {
			return err
		}
	}
	prog := progress.NewTicking(progress.New(progOut, total, live))
	stop := prog.Start(ctx, tickEvery, time.Now)
	final, err := c.Follow(ctx, runID, prog.Event)
	stop()
	if err != nil {
		return a.detached(ctx, runID, err)
	}
	if a.jsonOut() {
		if err := a.printJSON(final); err != nil {
			return err
		}
	} else if err := prog.Do(func(p *progress.Printer) error { return p.Summary(final) }); err != nil {
		return err
	}
	if final.Status != messages.RunSucceeded {
		msg := fmt.Sprintf("run %s %s", final.SharedRunID, final.Status)
		if final.FailureReason != "" {
			msg += ": " + final.FailureReason
		}
		if a.jsonOut() {
			return fmt.Errorf("%s", msg)
		}
		return &quietError{msg: msg}
	}
	return nil
}

// detached explains an interrupted follow: after Ctrl-C (ctx ended) the run goes on and the
// message says how to re-attach; other errors are returned as they are.
func (a *app) detached(ctx context.Context, runID string, err error) error {
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) && !errors.Is(err, context.Canceled) {
		return err
	}
	again := "dair runs watch " + runID
	if a.server != "" && a.server != "http://127.0.0.1:8080" {
		again = "dair --server " + a.server + " runs watch " + runID
	}
	fmt.Fprintf(a.stderr, "\ndair: stopped following run %s; the run goes on. Re-attach with: %s\n", runID, again)
	return &quietError{msg: "interrupted"}
}
