package actors_test

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// startCounting is the embedded store counting the execution starts written on their own
// (StartExecution, QueueStartExecution) and the takeovers of an execution (AcquireExecution).
type startCounting struct {
	*boltstore.Store
	starts, acquires atomic.Int64
}

func (s *startCounting) StartExecution(ctx context.Context, st store.ExecutionStart) (store.StartResult, error) {
	s.starts.Add(1)
	return s.Store.StartExecution(ctx, st)
}

func (s *startCounting) QueueStartExecution(ctx context.Context, st store.ExecutionStart) (func() (store.StartResult, error), error) {
	s.starts.Add(1)
	return s.Store.QueueStartExecution(ctx, st)
}

func (s *startCounting) AcquireExecution(ctx context.Context, id, owner, instanceID string) (int64, error) {
	s.acquires.Add(1)
	return s.Store.AcquireExecution(ctx, id, owner, instanceID)
}

// TestNode_embeddedAssignmentStartsTheExecution: on the embedded store a new run's execution
// whose first step is not pure is started by the write that assigns the run
// (store.StartingAssigner), whether the run is handed off on submit or dispatched by the pump:
// no start of its own, no takeover, the execution at epoch 1, one execution_started entry
// right after the decision's. A run whose first steps are all pure keeps its queued start
// (store.QueuedStarter), which its steps' commits share. Either way the dispatch entry comes
// before every step record (the first step waits at the delivery's gate).
func TestNode_embeddedAssignmentStartsTheExecution(t *testing.T) {
	const napFirst = `
key: nap-first
steps:
  - id: a
    uses: sleep
    with: {duration: 1ms}
  - id: b
    uses: echo
    needs: [a]
    with: {value: "b"}
`
	cases := []struct {
		name, pipeline, key string
		ownStarts           int64 // per run
	}{
		{"first step not pure", napFirst, "nap-first", 0},
		{"pure first step", threeStep, "three", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st *startCounting
			_, n := embeddedNode(t, actors.Config{}, func(db *boltstore.Store) store.Store {
				st = &startCounting{Store: db}
				return st
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(tc.pipeline))
			require.NoError(t, err)
			snap := &messages.ExecutionContextSnapshot{TenantId: "acme", UserId: "u1", Source: "test", Roles: []string{"tenant"}}
			// The first run waits for its scope's scale-out, so it starts from the pump; the
			// later ones find room and are handed off on submit.
			modes := []string{actors.SubmitQueueFirst, actors.SubmitQueueFirst, actors.SubmitDirect}
			for i, mode := range modes {
				run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: tc.key, Input: []byte(`{"name":"x"}`), Snapshot: snap, Mode: mode})
				require.NoError(t, err)
				done, err := n.Await(ctx, run.SharedRunId)
				require.NoError(t, err)
				require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
				x, _, err := st.GetExecution(ctx, done.ExecutionId)
				require.NoError(t, err)
				require.EqualValues(t, 1, x.Epoch, "run %d", i)
				entries, err := st.ReadLedger(ctx, done.SharedRunId, 0, 0)
				require.NoError(t, err)
				starts, dispatched := 0, false
				for j, e := range entries {
					switch e.Kind {
					case messages.KindDispatch:
						dispatched = true
					case messages.KindStepStarted, messages.KindStepSucceeded, messages.KindRunSucceeded:
						require.True(t, dispatched, "run %d: a step record before the dispatch entry: %v", i, kindsOf(entries))
					case messages.KindExecutionStarted:
						starts++
						if tc.ownStarts == 0 {
							require.Equal(t, messages.KindReservation, entries[j-1].Kind, "run %d: %v", i, kindsOf(entries))
						}
					case messages.KindRecovery:
						t.Fatalf("run %d was recovered: %v", i, kindsOf(entries))
					}
				}
				require.Equal(t, 1, starts, "run %d: %v", i, kindsOf(entries))
			}
			require.Equal(t, tc.ownStarts*int64(len(modes)), st.starts.Load(), "executions started on their own")
			require.Zero(t, st.acquires.Load(), "executions taken over")
		})
	}
}

// embeddedNode starts a node on a fresh embedded store (fsync off), given to the node through
// wrap (nil: as it is), with cfg's instances and timings (zero: pump 10 ms, heartbeat and
// recovery 100 ms). Both stop at the end of t.
func embeddedNode(t *testing.T, cfg actors.Config, wrap func(*boltstore.Store) store.Store) (*boltstore.Store, *actors.Node) {
	t.Helper()
	db, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	require.NoError(t, err)
	cfg.Store, cfg.NodeID = db, "prestart"
	if wrap != nil {
		cfg.Store = wrap(db)
	}
	cfg.PumpInterval = cmp.Or(cfg.PumpInterval, 10*time.Millisecond)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, 100*time.Millisecond)
	cfg.RecoveryInterval = cmp.Or(cfg.RecoveryInterval, 100*time.Millisecond)
	n, err := actors.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, n.Stop(context.Background()))
		require.NoError(t, db.Close())
	})
	return db, n
}

func kindsOf(entries []*messages.LedgerEntry) string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Kind
	}
	return fmt.Sprint(out)
}

// TestNode_startedRunCancelledInTheLocalQueue: a run whose assignment started its execution
// can still wait in its instance's local queue (the instance's one worker is busy); cancelled
// there, it ends with its execution: the run cancelled, the execution no longer listed as the
// instance's, the run's slot hold released.
func TestNode_startedRunCancelledInTheLocalQueue(t *testing.T) {
	settings := &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: "acme-runtime",
		MaxRuntimeInstances: 1, WorkerCountPerInstance: 1, MaxConcurrentRunsPerInstance: 2, LocalQueueCapacity: 10}
	db, n := embeddedNode(t, actors.Config{Instances: []actors.InstanceSpec{{ID: "acme-runtime-1", Settings: settings}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.PutTenant(ctx, settings)
	require.NoError(t, err)
	_, err = n.PutPipeline(ctx, []byte("key: nap\nsteps:\n  - id: a\n    uses: sleep\n    with: {duration: 1m}\n"))
	require.NoError(t, err)
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme", UserId: "u1", Source: "test", Roles: []string{"tenant"}}
	submit := func() *messages.SharedRun {
		t.Helper()
		var run *messages.SharedRun
		require.NoError(t, testkit.WaitFor(ctx, 10*time.Millisecond, func() (bool, error) {
			r, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap", Snapshot: snap, Mode: actors.SubmitDirect})
			run = r
			return err == nil, err
		}))
		return run
	}
	first := submit()
	require.NoError(t, testkit.WaitFor(ctx, 10*time.Millisecond, func() (bool, error) {
		r, err := n.GetRun(ctx, first.SharedRunId)
		return err == nil && r.Status == messages.RunRunning, err
	}), "the first run holds the instance's one worker")
	second := submit()
	var waiting *messages.SharedRun
	require.NoError(t, testkit.WaitFor(ctx, 10*time.Millisecond, func() (bool, error) {
		r, err := n.GetRun(ctx, second.SharedRunId)
		waiting = r
		return err == nil && r.Status == messages.RunRunning && r.ExecutionId != "", err
	}), "the second run is assigned, its execution started with the assignment")
	x, _, err := db.GetExecution(ctx, waiting.ExecutionId)
	require.NoError(t, err)
	require.Equal(t, messages.RunRunning, x.Status)

	done, err := n.ControlRun(ctx, second.SharedRunId, messages.OpCancelRun)
	require.NoError(t, err)
	require.Equal(t, messages.RunCancelled, done.Status)
	x, _, err = db.GetExecution(ctx, waiting.ExecutionId)
	require.NoError(t, err)
	require.Equal(t, messages.RunCancelled, x.Status, "the execution ends with the run")
	listed, err := db.ListExecutionsByInstance(ctx, "acme-runtime-1")
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, first.SharedRunId, listed[0].SharedRunId)
	require.NoError(t, testkit.WaitFor(ctx, 10*time.Millisecond, func() (bool, error) {
		n, err := db.ReservationCount(ctx, "acme-runtime-1")
		return n == 1, err
	}), "only the first run holds a slot")
	entries, err := db.ReadLedger(ctx, second.SharedRunId, 0, 0)
	require.NoError(t, err)
	cancels := 0
	for _, e := range entries {
		if e.Kind == messages.KindRunCancelled {
			cancels++
		}
	}
	require.Equal(t, 1, cancels, kindsOf(entries))
}

// TestNode_startedRunsThroughDrainRaces: runs whose assignment starts their execution, while
// one of the two instances is drained and undrained over and over: a delivery the draining
// instance refuses (its drain not yet published when the run was assigned to it) puts its
// started run back in the queue at once, its execution kept, and every run still succeeds with
// each step committed once. Recovery runs once a minute here, so it cannot be what brings a
// refused run back.
func TestNode_startedRunsThroughDrainRaces(t *testing.T) {
	settings := &messages.TenantSettings{TenantId: "acme", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: "acme-runtime",
		MaxRuntimeInstances: 2, WorkerCountPerInstance: 64, MaxConcurrentRunsPerInstance: 32, LocalQueueCapacity: 100}
	db, n := embeddedNode(t, actors.Config{PumpInterval: 5 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond, RecoveryInterval: time.Minute,
		Instances: []actors.InstanceSpec{{ID: "acme-runtime-1", Settings: settings}, {ID: "acme-runtime-2", Settings: settings}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := n.PutTenant(ctx, settings)
	require.NoError(t, err)
	_, err = n.PutPipeline(ctx, []byte("key: nap-echo\nsteps:\n  - id: a\n    uses: sleep\n    with: {duration: 1ms}\n"+
		"  - id: b\n    uses: echo\n    needs: [a]\n    with: {value: b}\n"))
	require.NoError(t, err)
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme", UserId: "u1", Source: "test", Roles: []string{"tenant"}}

	stop := make(chan struct{})
	toggled := make(chan struct{})
	go func() {
		defer close(toggled)
		for op := messages.OpDrainQueue; ; {
			select {
			case <-stop:
				_, _ = n.ControlInstance(context.Background(), "acme-runtime-2", messages.OpUndrainQueue)
				return
			case <-time.After(2 * time.Millisecond):
			}
			_, _ = n.ControlInstance(ctx, "acme-runtime-2", op)
			if op == messages.OpDrainQueue {
				op = messages.OpUndrainQueue
			} else {
				op = messages.OpDrainQueue
			}
		}
	}()
	// Runs are submitted for a second, a few at a time, so that they meet many drains.
	var ids []string
	pace := time.NewTicker(time.Millisecond)
	defer pace.Stop()
	for end := time.Now().Add(time.Second); time.Now().Before(end); <-pace.C {
		for i := 0; i < 4; i++ {
			mode := actors.SubmitQueueFirst
			if i%2 == 1 {
				mode = actors.SubmitDirect
			}
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "nap-echo", Snapshot: snap, Mode: mode})
			require.NoError(t, err)
			ids = append(ids, run.SharedRunId)
		}
	}
	actx, acancel := context.WithTimeout(ctx, 20*time.Second) // well below the recovery interval
	defer acancel()
	for _, id := range ids {
		done, err := n.Await(actx, id)
		require.NoError(t, err, "run %s", id)
		require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	}
	close(stop)
	<-toggled
	refused := 0
	for _, id := range ids {
		entries, err := db.ReadLedger(ctx, id, 0, 0)
		require.NoError(t, err)
		succeeded := map[string]int{}
		for _, e := range entries {
			switch e.Kind {
			case messages.KindStepSucceeded:
				succeeded[e.StepId]++
			case messages.KindDispatchFailed:
				refused++
			}
		}
		require.Equal(t, map[string]int{"a": 1, "b": 1}, succeeded, "run %s: %s", id, kindsOf(entries))
	}
	t.Logf("%d runs, %d deliveries refused by the draining instance", len(ids), refused)
}
