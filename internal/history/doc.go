// Package history turns a run's durable ledger into a trace timeline and replays a finished
// execution from its recorded step outputs, without calling any handler, reporting every
// divergence from what was recorded. It is pure: no I/O, no clocks.
//
// # Usage
//
//	spans := history.Trace(entries)
//	report := history.Replay(history.ReplayInput{Pipeline: p, Graph: g, Execution: ex, Steps: steps, Ledger: entries})
//	if report.Diverged { ... }
package history
