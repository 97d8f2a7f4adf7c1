package main

// fault is one deliberate bug: in file (relative to the module root), the exact text old,
// which must occur exactly once, is replaced by new. When the code moves, re-anchor old.
type fault struct {
	name string
	file string
	old  string
	new  string
}

// faults are the bugs that the tests outside internal/store must catch. Each breaks one
// promise of "never commits a completed step twice", of "usage equals the ledger" or of "a
// run's ledger is in causal order".
var faults = []fault{
	{
		name: "redis-commit-no-epoch-check",
		file: "internal/store/redisstore/scripts.go",
		old:  "if cur[1] ~= ARGV[ao + 1] then return -2 end\n",
		new:  "",
	},
	{
		name: "bolt-commit-no-epoch-check",
		file: "internal/store/boltstore/executions.go",
		old: `	if x.GetEpoch() != c.Epoch {
		return fmt.Errorf("boltstore: commit %s/%s epoch %d (current %d): %w", c.ExecutionID, stepID,
			c.Epoch, x.GetEpoch(), store.ErrStaleEpoch), nil, nil
	}
`,
		new: "",
	},
	{
		// Only a second success is refused: a "running" write replaces a succeeded step, after
		// which a second success is accepted.
		name: "redis-write-over-succeeded-step",
		file: "internal/store/redisstore/scripts.go",
		old:  "if redis.call('HGET', KEYS[ko + 3], step) == 'succeeded' then return -3 end",
		new:  "if ARGV[ao + 4] == 'succeeded' and redis.call('HGET', KEYS[ko + 3], step) == 'succeeded' then return -3 end",
	},
	{
		name: "bolt-write-over-succeeded-step",
		file: "internal/store/boltstore/executions.go",
		old:  "if ok && prev.GetStatus() == messages.StepSucceeded {",
		new:  "if ok && prev.GetStatus() == messages.StepSucceeded && c.Step.GetStatus() == messages.StepSucceeded {",
	},
	{
		// Rehydration plans the restart as if no step had committed.
		name: "rehydration-ignores-committed-steps",
		file: "actors/execution_load.go",
		old:  "Steps: m.steps, Input: m.exec.Input,",
		new:  "Steps: nil, Input: m.exec.Input,",
	},
	{
		// A run's finish folded into its last step's commit is written under the execution's
		// current epoch, whatever the commit's answer: a fenced activation finishes the run.
		name: "bolt-folded-finish-outside-the-fence",
		file: "internal/store/boltstore/executions.go",
		old: `	if res != nil && !errors.Is(res, store.ErrAlreadyCommitted) {
		return store.FinishOutcome{Err: res}, nil
	}
	f := *c.Finish
	f.ExecutionID, f.Epoch = c.ExecutionID, c.Epoch
`,
		new: `	x, _ := loadExecution(tx, "finish", c.ExecutionID)
	f := *c.Finish
	f.ExecutionID, f.Epoch = c.ExecutionID, x.GetEpoch()
`,
	},
	{
		// The same on Redis: a fenced commit's folded finish is written under the execution's
		// current epoch.
		name: "redis-folded-finish-outside-the-fence",
		file: "internal/store/redisstore/scripts.go",
		old:  "if c == -1 or c == -2 then return {c} end\n",
		new:  "if c == -2 then ARGV[n + 5] = redis.call('HGET', KEYS[1], 'epoch') end\nif c == -1 then return {c} end\n",
	},
	{
		// Usage recorded before the fence instead of by the fenced commit: a commit call
		// carrying a usage event meters once per attempt whether its epoch holds or not.
		name: "redis-usage-outside-the-fence",
		file: "internal/store/redisstore/scripts.go",
		old:  "if cur[1] ~= ARGV[ao + 1] then return -2 end\n",
		new: "if ARGV[ao + 6] ~= '' and redis.call('HSETNX', KEYS[ko + 4], ARGV[ao + 6], '1') == 1 then\n" +
			"  redis.call('RPUSH', KEYS[ko + 5], ARGV[ao + 7])\n  redis.call('SADD', KEYS[ko + 6], ARGV[ao + 8])\nend\n" +
			"if cur[1] ~= ARGV[ao + 1] then return -2 end\n",
	},
	{
		// The committer's folded write (a step's start and end) takes the start's place instead
		// of the end's, carrying the end across the run's records in between: a parallel step's
		// records, and the run's finish riding on a later commit, are reordered in its ledger.
		name: "committer-folds-across-the-run",
		file: "internal/ledger/committer.go",
		old:  "if here := end; i != here {",
		new:  "if here := start; i != here {",
	},
}

// testRun is one `go test` invocation of the suite: a package and a -run pattern.
type testRun struct {
	pkg string
	run string
}

// suite is what each mutant is tested with, in order; the first run that fails catches the
// mutant (the later runs are skipped unless -all). Nothing from internal/store is run.
var suite = []testRun{
	{pkg: "./internal/ledger/", run: "^TestCommitter_foldKeepsTheRunsOrder$"},
	{pkg: "./actors/", run: "^(TestExecution_staleEpochStopsExecution|TestNode_wronglyRecoveredRunComesBackToItsInstance|" +
		"TestExecution_rehydrationMissingCommittedStepsCommitsNothingTwice|TestExecution_injectedPanicRestartsAndRehydrates|" +
		"TestExecution_fencedAtTheLastStepFinishesNothing)$"},
	{pkg: "./internal/demo/", run: "^TestRun_Run_scenario$"},
	{pkg: "./internal/api/", run: "^TestServer_Runs_happyPath$"},
	{pkg: "./cmd/dair/", run: "^(TestCrash_sigkillMidRunResumesExactlyOnce|TestCluster_pausedNodeIsFencedAndRejoins)$"},
	{pkg: "./cmd/dair/", run: "^TestCluster_usageEqualsLedgerUnderFaults$"},
}
