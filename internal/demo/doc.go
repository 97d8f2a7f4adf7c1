// Package demo is the `dair demo` scenario: a self-contained tour of dair on the embedded
// store that needs no other process, no network beyond 127.0.0.1 and no API key.
//
// Run starts an in-process node on a bbolt store, an OpenAI-compatible stand-in model server
// and a flaky HTTP endpoint, creates the three tenants of seed 000 (tenant-a Dedicated,
// tenant-b Hybrid, default Shared), loads the example pipelines, and then:
//
//  1. submits runs for each tenant and follows their ledgers step by step;
//  2. shows where each run was placed and why (admission reason, scale-out request);
//  3. simulates a crash while sleep chains are running (closes the store under the running
//     node, then stops the node in process), starts a new node on the same data and shows the
//     runs resume with the same execution ids and that no step committed before the crash
//     runs again (its step record is unchanged and its handler, counted by the demo, is not
//     called);
//  4. replays one finished execution and prints the report;
//  5. prints a summary table.
//
// The example pipelines are embedded (a byte-for-byte copy of examples/pipelines, kept in sync
// by a test), so the binary works from any directory.
//
// # Usage
//
//	err := demo.Run(ctx, demo.Options{Out: os.Stdout})
//	if errors.Is(err, demo.ErrRunFailed) || errors.Is(err, demo.ErrDiverged) {
//		// the scenario ran but did not end as expected
//	}
package demo
