package actors_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// markDroppingStore is a store whose first write marking a run running (the activation's
// "execution_started" mark) is lost, and whose run is then requeued, as a recovery round does
// that took the run's instance for lost while the store was away (dair chaos, redis-restart:
// the run then ran twice under two execution ids).
type markDroppingStore struct {
	store.Store
	tripped  atomic.Bool
	requeued chan error // receives the outcome of the requeue; buffered 1
}

func (m *markDroppingStore) UpdateRunAndAppend(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, error)) (*messages.SharedRun, *messages.LedgerEntry, error) {
	if !m.tripped.Load() {
		cur, err := m.Store.GetRun(ctx, id)
		if err == nil {
			probe := proto.Clone(cur).(*messages.SharedRun)
			if e, ferr := fn(probe); ferr == nil && e != nil && e.Kind == messages.KindExecutionStarted && m.tripped.CompareAndSwap(false, true) {
				go func() { m.requeued <- m.requeue(id) }()
				return nil, nil, errors.New("test: connection reset by peer")
			}
		}
	}
	return m.Store.UpdateRunAndAppend(ctx, id, fn)
}

// markDroppingLifecycle is markDroppingStore for a store with store.ExecutionLifecycle: the
// first StartExecution (the create and the mark in one call) is lost, before its write or,
// with writeFirst, after it (its answer was lost), and the run is requeued.
type markDroppingLifecycle struct {
	*markDroppingStore
	writeFirst bool
}

func (m markDroppingLifecycle) StartExecution(ctx context.Context, s store.ExecutionStart) (store.StartResult, error) {
	life := m.Store.(store.ExecutionLifecycle)
	if s.Entry.GetKind() == messages.KindExecutionStarted && m.tripped.CompareAndSwap(false, true) {
		if m.writeFirst {
			if _, err := life.StartExecution(ctx, s); err != nil {
				return store.StartResult{}, err
			}
		}
		go func() { m.requeued <- m.requeue(s.Execution.GetSharedRunId()) }()
		return store.StartResult{}, errors.New("test: connection reset by peer")
	}
	return life.StartExecution(ctx, s)
}

func (m markDroppingLifecycle) FinishExecution(ctx context.Context, f store.ExecutionFinish) (store.FinishResult, error) {
	return m.Store.(store.ExecutionLifecycle).FinishExecution(ctx, f)
}

// requeue puts run id back in the shared queue once the pump has settled its claim (an
// Enqueue of a claimed item is a no-op), as the recovery coordinator would.
func (m *markDroppingStore) requeue(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := testkit.WaitFor(ctx, 5*time.Millisecond, func() (bool, error) {
		pending, claimed, err := m.Store.QueueDepth(ctx)
		return err == nil && pending == 0 && claimed == 0, err
	})
	if err != nil {
		return err
	}
	if _, err := m.Store.UpdateRun(ctx, id, func(r *messages.SharedRun) error {
		r.Status, r.AssignedRuntimeInstanceId, r.FailureReason = messages.RunQueued, "", "runtime-instance-lost"
		return nil
	}); err != nil {
		return err
	}
	return m.Store.Enqueue(ctx, id)
}

// executionsSeen is a step handler that records which executions called it, per step.
type executionsSeen struct {
	mu    sync.Mutex                // guards calls
	calls map[string]map[string]int // step id -> execution id -> calls
}

func (h *executionsSeen) Run(ctx context.Context, r *step.Request) (step.Result, error) {
	h.mu.Lock()
	if h.calls[r.StepID] == nil {
		h.calls[r.StepID] = map[string]int{}
	}
	h.calls[r.StepID][r.ExecutionID]++
	h.mu.Unlock()
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return step.Result{}, ctx.Err()
	}
	return step.Result{Output: map[string]any{"step": r.StepID}}, nil
}

// TestExecution_lostMarkOfARequeuedRunDoesNotRun: an activation created its execution, but its
// write marking the run running was lost, and the run was requeued meanwhile and dispatched to
// another instance. The activation retries its load: it must find the run no longer its own and
// stop without calling a handler, so the run runs once, under one execution id. With
// store.ExecutionLifecycle (the create and the mark in one call) the call is lost before its
// write, or after it with its answer.
func TestExecution_lostMarkOfARequeuedRunDoesNotRun(t *testing.T) {
	for _, b := range testkit.Backends {
		for _, mode := range []string{"separate", "lifecycle", "lifecycle-answer-lost"} {
			t.Run(string(b)+"/"+mode, func(t *testing.T) { lostMarkOfARequeuedRun(t, b, mode) })
		}
	}
}

func lostMarkOfARequeuedRun(t *testing.T, b testkit.Backend, mode string) {
	h := &executionsSeen{calls: map[string]map[string]int{}}
	ms := &markDroppingStore{Store: testkit.OpenStore(t, b, nil), requeued: make(chan error, 1)}
	var st store.Store = ms
	if mode != "separate" {
		st = markDroppingLifecycle{markDroppingStore: ms, writeFirst: mode == "lifecycle-answer-lost"}
	}
	shared := func(id string) actors.InstanceSpec {
		return actors.InstanceSpec{ID: id, Settings: &messages.TenantSettings{TenantId: "default", IsolationMode: messages.IsolationShared,
			RuntimeInstanceIdPrefix: "runtime-instance", MaxRuntimeInstances: 2, WorkerCountPerInstance: 1, MaxConcurrentRunsPerInstance: 1}}
	}
	n, err := actors.Start(context.Background(), actors.Config{Store: st, Handlers: registryWith(t, "seen", h), NodeID: "test-node",
		PumpInterval: 10 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, RecoveryInterval: 100 * time.Millisecond,
		Instances: []actors.InstanceSpec{shared("runtime-instance-1"), shared("runtime-instance-2")}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Stop(context.Background())) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = n.PutPipeline(ctx, []byte(chain("four", "seen", 4, "")))
	require.NoError(t, err)
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "four", Snapshot: tenantSnap("acme")})
	require.NoError(t, err)
	done, err := n.Await(ctx, run.SharedRunId)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
	require.True(t, ms.tripped.Load(), "the first mark was not dropped")
	require.NoError(t, <-ms.requeued)
	// The activation whose mark was lost retries its load a second later: wait until
	// it has ended on its instance, whatever it did.
	testkit.Eventually(t, 15*time.Second, 10*time.Millisecond, func() bool {
		for _, id := range []string{"runtime-instance-1", "runtime-instance-2"} {
			d, err := n.Store().GetInstance(ctx, id)
			if err != nil || d.ActiveRunCount != 0 {
				return false
			}
		}
		return true
	}, "both instances idle")

	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.calls, 4)
	for id, byExec := range h.calls {
		require.Len(t, byExec, 1, "step %s ran under several executions: %v", id, byExec)
		for exec, k := range byExec {
			require.Equal(t, done.ExecutionId, exec, "step %s ran under another execution than the run's", id)
			require.Equal(t, 1, k, "step %s called %d times", id, k)
		}
	}
}
