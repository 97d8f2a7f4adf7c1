package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/client"
)

// completeTimeout bounds one completion's request to the node: a shell waits for it.
const completeTimeout = 2 * time.Second

// completeLimit is how many recent runs run-id completion offers.
const completeLimit = 50

// completePipelines completes a PIPELINE argument with the node's pipeline keys (nothing when
// the node does not answer).
func (a *app) completePipelines(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := a.completeContext(cmd)
	defer cancel()
	l, err := a.client().ListPipelines(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]cobra.Completion, 0, len(l.Pipelines))
	for _, p := range l.Pipelines {
		out = append(out, cobra.CompletionWithDesc(p.Key, p.Description))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeRuns completes a run ID argument with the most recent runs' ids.
func (a *app) completeRuns(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := a.completeContext(cmd)
	defer cancel()
	l, err := a.client().QueryRuns(ctx, client.RunQuery{Limit: completeLimit})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]cobra.Completion, 0, len(l.Runs))
	for _, r := range l.Runs {
		out = append(out, cobra.CompletionWithDesc(r.SharedRunID, r.Pipeline+" "+r.Status))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeContext normalizes --server (completion skips PersistentPreRunE) and bounds the
// request.
func (a *app) completeContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	if u, err := client.NormalizeBaseURL(a.server); err == nil {
		a.server = u
	}
	return context.WithTimeout(cmd.Context(), completeTimeout)
}

// wireCompletion sets the dynamic completions of the commands that take a pipeline key or a
// run id.
func wireCompletion(a *app, root *cobra.Command) {
	for _, path := range [][]string{{"submit"}, {"pipelines", "get"}} {
		if c, _, err := root.Find(path); err == nil {
			c.ValidArgsFunction = a.completePipelines
		}
	}
	for _, path := range [][]string{{"runs", "get"}, {"runs", "watch"}, {"runs", "cancel"}, {"runs", "pause"}, {"runs", "resume"}} {
		if c, _, err := root.Find(path); err == nil {
			c.ValidArgsFunction = a.completeRuns
		}
	}
}
