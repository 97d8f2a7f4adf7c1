package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// counter is a step handler that counts calls per step id and can panic or block on demand.
type counter struct {
	mu       sync.Mutex // guards calls
	calls    map[string]int
	finished map[string]int
	panicOn  map[string]int // step id -> attempt that panics
	delay    time.Duration
	snapshot *messages.ExecutionContextSnapshot
}

func newCounter() *counter {
	return &counter{calls: map[string]int{}, finished: map[string]int{}, panicOn: map[string]int{}}
}

func (c *counter) done(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished[id]
}

func (c *counter) Run(ctx context.Context, r *step.Request) (step.Result, error) {
	c.mu.Lock()
	c.calls[r.StepID]++
	p := c.panicOn[r.StepID]
	c.snapshot = r.Snapshot
	c.mu.Unlock()
	if p == r.Attempt {
		panic("boom in " + r.StepID)
	}
	if c.delay > 0 {
		t := time.NewTimer(c.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return step.Result{}, ctx.Err()
		}
	}
	c.mu.Lock()
	c.finished[r.StepID]++
	c.mu.Unlock()
	return step.Result{Output: map[string]any{"step": r.StepID, "attempt": r.Attempt}}, nil
}

func (c *counter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

func registryWith(t *testing.T, name string, h step.Handler) *step.Registry {
	t.Helper()
	reg := step.NewRegistry()
	require.NoError(t, handlers.Register(reg, handlers.Options{}))
	require.NoError(t, reg.Register(name, h))
	return reg
}

// chain returns a pipeline of n sequential steps using handler uses.
func chain(key, uses string, n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key: %s\nsteps:\n", key)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: s%02d\n    uses: %s\n%s", i, uses, extra)
		if i > 1 {
			fmt.Fprintf(&b, "    needs: [s%02d]\n", i-1)
		}
	}
	return b.String()
}

func tenantSnap(tenant string) *messages.ExecutionContextSnapshot {
	return &messages.ExecutionContextSnapshot{TenantId: tenant, OrgId: "org-1", UserId: "user-1", CorrelationId: "corr-1",
		RequestedBy: "user-1", Source: "test", Roles: []string{"tenant"}}
}

func ledgerKinds(t *testing.T, n *actors.Node, runID string) (map[string]int, []*messages.LedgerEntry) {
	t.Helper()
	_, entries, err := n.Ledger(context.Background(), runID, 0)
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	return kinds, entries
}

func succeededPerStep(entries []*messages.LedgerEntry) map[string]int {
	m := map[string]int{}
	for _, e := range entries {
		if e.Kind == messages.KindStepSucceeded {
			m[e.StepId]++
		}
	}
	return m
}

// usageOf counts the usage events of runID in tenant's usage: step events by step, and run
// events.
func usageOf(t *testing.T, n *actors.Node, tenant, runID string) (steps map[string]int, runs int) {
	t.Helper()
	events, err := n.Store().ListUsage(context.Background(), store.UsageFilter{TenantID: tenant})
	require.NoError(t, err)
	steps = map[string]int{}
	for _, ev := range events {
		switch {
		case ev.SharedRunId != runID:
		case ev.Kind == "step":
			steps[ev.StepId]++
		case ev.Kind == "run":
			runs++
		}
	}
	return steps, runs
}

func TestExecution_handlerPanicFailsOnlyThatAttempt(t *testing.T) {
	c := newCounter()
	c.panicOn["s02"] = 1
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{Handlers: registryWith(t, "count", c)}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(chain("panicky", "count", 3, "    retry: {max_attempts: 2, backoff: 10ms}\n")))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "panicky", Snapshot: tenantSnap("acme")})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	require.Equal(t, 2, c.count("s02"))
	require.Equal(t, 1, c.count("s01"))
	_, entries := ledgerKinds(t, n, run.SharedRunId)
	var failed []*messages.LedgerEntry
	for _, e := range entries {
		if e.Kind == messages.KindStepFailed {
			failed = append(failed, e)
		}
	}
	require.Len(t, failed, 1)
	require.Equal(t, "s02", failed[0].StepId)
	require.Contains(t, failed[0].Reason, "panicked")
	require.Equal(t, map[string]int{"s01": 1, "s02": 1, "s03": 1}, succeededPerStep(entries))
}

func TestExecution_injectedPanicRestartsAndRehydrates(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			c := newCounter()
			c.delay = 50 * time.Millisecond
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: b, Config: actors.Config{Handlers: registryWith(t, "count", c)}})
			tap := testkit.TapSupervisorEvents(t, n.System())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(chain("eight", "count", 8, "")))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "eight", Snapshot: tenantSnap("acme")})
			require.NoError(t, err)
			var before map[string]int
			testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
				_, entries := ledgerKinds(t, n, run.SharedRunId)
				before = succeededPerStep(entries)
				return len(before) >= 3
			}, "three steps committed")
			require.NoError(t, actors.InjectExecutionPanic(ctx, n, run.SharedRunId))
			tap.ExpectSupervisorEvent(5 * time.Second)
			done, err := n.Await(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
			_, entries := ledgerKinds(t, n, run.SharedRunId)
			per := succeededPerStep(entries)
			require.Len(t, per, 8)
			for id, k := range per {
				require.Equal(t, 1, k, "step %s succeeded %d times", id, k)
			}
			for id := range before {
				require.Equal(t, 1, c.count(id), "committed step %s was called again after the restart", id)
			}
			steps, runs := usageOf(t, n, "acme", run.SharedRunId)
			require.Equal(t, per, steps, "step usage differs from the ledger")
			require.Equal(t, 1, runs, "run usage events")
		})
	}
}

// TestExecution_staleEpochStopsExecution: another owner takes a running execution over
// (AcquireExecution bumps its epoch); the fenced activation stops without adding a step record,
// a ledger entry or a handler call (beyond the one attempt in flight at the fence, whose commit
// is refused), and without finalizing the run.
func TestExecution_staleEpochStopsExecution(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			c := newCounter()
			c.delay = 40 * time.Millisecond
			n := testkit.StartNode(t, testkit.NodeOptions{Backend: b, Config: actors.Config{Handlers: registryWith(t, "count", c),
				RecoveryInterval: time.Hour}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := n.PutPipeline(ctx, []byte(chain("ten", "count", 10, "")))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "ten", Snapshot: tenantSnap("acme")})
			require.NoError(t, err)
			var execID string
			testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
				r, err := n.GetRun(ctx, run.SharedRunId)
				require.NoError(t, err)
				execID = r.ExecutionId
				kinds, entries := ledgerKinds(t, n, run.SharedRunId)
				done := len(succeededPerStep(entries))
				// A step in flight with its start written: the fence then meets its success
				// commit (and the usage it carries), not the start record's.
				return done >= 2 && kinds[messages.KindStepStarted] == done+1
			}, "two steps committed and the next one running")
			x, _, err := n.Store().GetExecution(ctx, execID)
			require.NoError(t, err)
			// Another owner takes the execution over: our epoch is now stale.
			newEpoch, err := n.Store().AcquireExecution(ctx, execID, "someone-else", "elsewhere")
			require.NoError(t, err)
			require.Equal(t, x.Epoch+1, newEpoch)
			mark := markFence(t, n, run.SharedRunId, execID, x.Epoch, c.callsCopy)
			require.Less(t, len(mark.steps), 10, "the run finished before the fence; the test proves nothing")
			testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
				d, err := n.Store().GetInstance(ctx, "runtime-instance-1")
				return err == nil && d.RunningRunCount == 0
			}, "fenced execution stopped")
			mark.requireNothingAdded(t, n, chainNeeds(10), 0, c.callsCopy())
			_, entries := ledgerKinds(t, n, run.SharedRunId)
			require.Len(t, entries, mark.ledger, "ledger entries were added after the fence")
			// The attempt in flight at the fence succeeded, but its commit was refused: no usage.
			steps, runs := usageOf(t, n, "acme", run.SharedRunId)
			require.Equal(t, succeededPerStep(entries), steps, "step usage differs from the ledger")
			require.Zero(t, runs, "run usage events")
			r, err := n.GetRun(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.False(t, messages.IsTerminalRun(r.Status), "a fenced execution must not finalize the run")
		})
	}
}

func TestExecution_snapshotArrivesUnchanged(t *testing.T) {
	c := newCounter()
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{Handlers: registryWith(t, "count", c)}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(chain("one", "count", 1, "")))
	require.NoError(t, err)
	snap := tenantSnap("acme")
	snap.TenantGroupId = "acme-group"
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "one", Snapshot: snap, CorrelationID: "corr-1"})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status)
	c.mu.Lock()
	got := c.snapshot
	c.mu.Unlock()
	require.True(t, proto.Equal(snap, got), "snapshot changed on the way: sent %v, got %v", snap, got)
}

func TestInstance_rejectsRunWithoutSnapshot(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, n.CreateInstance(ctx, actors.InstanceSpec{ID: "runtime-instance-9", Settings: &messages.TenantSettings{TenantId: "default"}}))
	var pid *actor.PID
	testkit.Eventually(t, 15*time.Second, 5*time.Millisecond, func() bool {
		p, ok := n.LocalInstance("runtime-instance-9")
		pid = p
		return ok
	}, "instance started")
	res, err := n.System().Root.RequestFuture(pid, &messages.DispatchRequest{SharedRunId: "r1", PipelineKey: "p"}, 5*time.Second).Result()
	require.NoError(t, err)
	pr := res.(*messages.ProviderResult)
	require.False(t, pr.Ok)
	require.Equal(t, "missing-execution-context", pr.Reason)
	require.False(t, pr.Retryable)

	// A dispatch no pump sends (hand-made at a host's transport) is refused for good and
	// holds no slot: one per rule of invalidDispatch.
	snap := &messages.ExecutionContextSnapshot{TenantId: "acme"}
	for name, req := range map[string]*messages.DispatchRequest{
		"no run":               {PipelineKey: "p", Snapshot: snap},
		"no pipeline":          {SharedRunId: "r2", Snapshot: snap},
		"negative parallelism": {SharedRunId: "r3", PipelineKey: "p", Snapshot: snap, MaxParallelism: -5},
		"bad tenant id":        {SharedRunId: "r4", PipelineKey: "p", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "BAD TENANT"}},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := n.System().Root.RequestFuture(pid, req, 5*time.Second).Result()
			require.NoError(t, err)
			pr := res.(*messages.ProviderResult)
			require.False(t, pr.Ok)
			require.Equal(t, "invalid-dispatch", pr.Reason)
			require.False(t, pr.Retryable)
		})
	}
	res, err = n.System().Root.RequestFuture(pid, &messages.ControlRequest{Op: "reboot"}, 5*time.Second).Result()
	require.NoError(t, err)
	pr = res.(*messages.ProviderResult)
	require.Equal(t, "unknown-op", pr.Reason)
	require.False(t, pr.Retryable, "an unknown op stays unknown")
	st, err := n.System().Root.RequestFuture(pid, &messages.QueueStatusRequest{}, 5*time.Second).Result()
	require.NoError(t, err)
	q := st.(*messages.QueueStatus)
	require.Empty(t, q.QueuedLocalRunIds)
	require.Empty(t, q.RunningLocalRunIds)
}

func TestNode_directSubmitMode(t *testing.T) {
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{SubmitMode: actors.SubmitDirect}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte(threeStep))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "three", Input: []byte(`{"name":"d"}`), Snapshot: tenantSnap("acme")})
		require.NoError(t, err)
		done, err := n.Await(ctx, run.SharedRunId)
		require.NoError(t, err)
		require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	}
	_, err = n.Submit(ctx, actors.SubmitRequest{Pipeline: "nope", Snapshot: tenantSnap("acme")})
	require.True(t, errors.Is(err, actors.ErrUnknownPipeline), err)
}

// A step whose output's JSON exceeds step.MaxOutputBytes fails at once (no retry: the same
// handler would give the same output), and the step after it never runs.
func TestExecution_outputOverTheLimitFailsTheStep(t *testing.T) {
	var calls atomic.Int32
	big := step.HandlerFunc(func(context.Context, *step.Request) (step.Result, error) {
		calls.Add(1)
		return step.Result{Output: strings.Repeat("x", step.MaxOutputBytes)}, nil // plus its quotes
	})
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{Handlers: registryWith(t, "big", big)}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := n.PutPipeline(ctx, []byte("key: huge\nsteps:\n  - {id: a, uses: big, retry: {max_attempts: 3, backoff: 1ms}}\n"+
		"  - {id: b, uses: echo, needs: [a], with: {value: x}}\n"))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "huge", Snapshot: tenantSnap("acme")})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunFailed, done.Status)
	require.Equal(t, int32(1), calls.Load(), "a permanent failure is not retried")
	_, entries := ledgerKinds(t, n, run.SharedRunId)
	for _, e := range entries {
		if e.StepId == "b" {
			require.Equal(t, messages.KindStepSkipped, e.Kind, "the step after the failed one ran")
		}
		if e.Kind == messages.KindStepFailed {
			require.Contains(t, e.Reason, "exceeds the limit")
		}
	}
}
