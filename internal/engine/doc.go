// Package engine is the state machine of one DAG execution: given a compiled pipeline, the
// committed step records and one event at a time, it returns the effects to carry out. It
// decides which steps start (ready steps in level-then-id order, up to a worker budget), when
// failed attempts retry (exponential backoff capped by the policy), when the run fails fast,
// which steps are skipped, how cancel, pause and resume apply, how an execution resumes from
// its commits after a crash, and that a fenced execution stops without writing.
//
// The package is pure, like etcd-io/raft's RawNode: no goroutines, no store, no actors, no
// clock (time comes in with each event). The execution actor in package actors is its shell:
// it feeds events in and carries effects out.
//
// # Life of an execution
//
// A Machine waits for Loaded (the execution record's status, the committed step records and the
// run's input). A step's attempt begins with a Commit of its start and a StartStep; its outcome
// (AttemptSucceeded, AttemptFailed, AttemptTimedOut) becomes a Commit of the result. A step's
// dependents become ready only when the commit of its success is answered (CommitDone), unless
// its handler is pure (Config.Pure): then they are ready as the Commit is sent (Commit.Async),
// and the run finalizes only once every commit is answered. An execution loaded Unconfirmed
// (its start queued, not yet written) starts only pure steps until Confirmed. A
// failure with attempts left commits the step back to pending and asks for a ScheduleRetry; a
// failure with none left commits the step failed, cancels the attempts in flight, commits every
// step that never started as skipped, and finalizes the run as failed. Cancel does the same
// without skipping; Pause starts nothing new until Resume. A CommitDone or FinalizeDone that
// reports fencing, or a Fenced event, ends the machine with Stop{Fenced: true} and nothing
// else. After Stop every event is ignored.
//
// # Usage
//
//	ix, err := engine.NewIndex(graph) // once per pipeline version; shared
//	if err != nil {
//		return err
//	}
//	m := engine.New(engine.Config{Workers: 4, DefaultTimeout: 5 * time.Minute, TenantID: tenant})
//	effects, err := m.Step(now, engine.Loaded{Index: ix, ExecutionID: id, Status: status,
//		Steps: committed, Input: input})
//	for _, e := range effects {
//		switch e := e.(type) {
//		case engine.Commit:
//			// write e.Record and e.Ledger under the epoch; later:
//			// m.Step(now, engine.CommitDone{ID: e.ID, Result: engine.CommitOK})
//		case engine.StartStep:
//			// run handler e.Uses with e.With; later: m.Step(now, engine.AttemptSucceeded{...})
//		case engine.Stop:
//			// report and stop
//		}
//	}
//
// Scenario scripts in testdata/ (events in, effects out) show every rule; see TestScenarios.
package engine
