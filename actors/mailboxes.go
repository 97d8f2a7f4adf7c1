package actors

import (
	"context"
	"time"
)

// Go runs fn on a parked goroutine of the pool, or a new one of the pool group, with the
// group's context; it reports false, running nothing, once the group is stopping. The node's
// work off the actor goroutines (step tasks, loads, finalizes) goes through it for the reason
// the mailboxes do: a fresh goroutine per task grows its stack again for every task.
func (d *agentDispatcher) Go(fn func(ctx context.Context)) bool {
	ctx := d.pool.Context()
	if ctx.Err() != nil {
		return false // stopping
	}
	run := func() { fn(ctx) }
	if p := d.take(); p != nil {
		p.run <- run
		return true
	}
	return d.pool.Go(func(context.Context) { d.loop(run) })
}

// GoTimeout is Go with a context that also ends after timeout.
func (d *agentDispatcher) GoTimeout(timeout time.Duration, fn func(ctx context.Context)) bool {
	return d.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		fn(ctx)
	})
}
