// Package chaos is the fault harness behind `dair chaos`: it starts a local cluster (package
// localcluster), runs a multi-tenant workload of multi-step pipelines while it injects a
// seeded schedule of faults (kill -9 and restart, SIGSTOP/SIGCONT, Redis killed and
// restarted, a membership partition), then judges properties over what the store and a
// counting HTTP server recorded, and reports recovery times.
//
// The judging is pure and apart from the processes: NewSchedule (seed → faults at times),
// Check and its Check* functions (Evidence → Property verdicts), Recoveries and
// SummarizeRecoveries (fault records and ledgers → recovery times) take values and do no I/O,
// so each rule is table-tested with hand-built ledgers. Run drives the processes: one
// goroutine submits, one polls, the caller's goroutine injects faults and then collects the
// evidence.
//
// # Usage
//
//	cfg := chaos.DefaultConfig()
//	cfg.Runs, cfg.Duration, cfg.Seed, cfg.Progress = 30, 25*time.Second, 1, os.Stderr
//	rep, err := chaos.Run(ctx, cfg) // blocks for about Duration plus the runs' tail
//	if err != nil {
//		return err // ErrBadConfig or ErrHarness: no verdict
//	}
//	err = rep.Print(os.Stdout)
//	if !rep.Passed {
//		// a property failed: rep.Properties says which, rep.Seed reproduces the schedule
//	}
package chaos
