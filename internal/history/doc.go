// Package history turns a run's durable ledger into a trace timeline and replays a finished
// execution from its recorded step outputs, without calling any handler, reporting every
// divergence from what was recorded; CheckCompat replays one against a new definition of its
// pipeline instead (steps added, removed, reordered, changed). It is pure: no I/O, no clocks.
//
// # Usage
//
//	spans := history.Trace(entries)
//	report := history.Replay(history.ReplayInput{Pipeline: p, Graph: g, Execution: ex, Steps: steps, Ledger: entries})
//	if report.Diverged { ... }
//	compat := history.CheckCompat(history.ReplayInput{...}, next, nextGraph)
package history
