// Package progress renders a run's event stream as the human progress display of the dair CLI
// (`dair submit --wait`, `dair runs watch`): one line per finished step and, on a terminal, a
// transient status line naming the running steps.
//
// # Usage
//
//	p := progress.New(os.Stderr, len(pipeline.Steps), isTerminal)
//	run, err := c.Follow(ctx, runID, p.Event) // c is a *client.Client
//	if err == nil {
//		err = p.Summary(run)
//	}
package progress
