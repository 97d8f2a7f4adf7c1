package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// fenceMark is what an execution held when another owner fenced its activation: the fenced
// activation's epoch, the step records, the ledger length and each step's handler calls
// (counted by the test's own handler, independently of the store).
type fenceMark struct {
	runID, execID string
	epoch         int64
	steps         map[string]*messages.StepState
	ledger        int
	calls         map[string]int
}

// markFence records the state of execID right after its activation at epoch was fenced: its
// step records and ledger length, then (so that a step committed at the mark was called
// before) the handler calls, from calls, which returns a copy of the calls per step id.
func markFence(t *testing.T, n *actors.Node, runID, execID string, epoch int64, calls func() map[string]int) *fenceMark {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := &fenceMark{runID: runID, execID: execID, epoch: epoch, steps: map[string]*messages.StepState{}}
	_, steps, err := n.Store().GetExecution(ctx, execID)
	require.NoError(t, err)
	for _, st := range steps {
		m.steps[st.StepId] = st
	}
	_, entries, err := n.Ledger(ctx, runID, 0)
	require.NoError(t, err)
	m.ledger = len(entries)
	// The calls last: every step committed at the mark has been called by now.
	m.calls = calls()
	return m
}

// requireNothingAdded reports every violation, then fails the test, when the fenced activation
// added a step record, a ledger entry or a handler call after the fence. needs is the
// pipeline's dependencies by step id; newOwner is the most calls the activation that replaced
// it may make of each step not succeeded at the fence (0 when nothing replaced it). A step the
// fenced activation could run at the fence (its needs, but not itself, committed by that
// activation or an earlier one) may also be called once by it: an attempt already in flight,
// or started by a commit answered just before the fence; what it commits is refused all the
// same.
func (m *fenceMark) requireNothingAdded(t *testing.T, n *actors.Node, needs map[string][]string, newOwner int, calls map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, steps, err := n.Store().GetExecution(ctx, m.execID)
	require.NoError(t, err)
	for _, st := range steps {
		if st.Epoch != m.epoch {
			continue
		}
		before, ok := m.steps[st.StepId]
		assert.True(t, ok && proto.Equal(before, st),
			"the fenced activation (epoch %d) wrote step %s after the fence: %v (at the fence: %v)", m.epoch, st.StepId, st, before)
	}
	_, entries, err := n.Ledger(ctx, m.runID, 0)
	require.NoError(t, err)
	for _, e := range entries[min(m.ledger, len(entries)):] {
		assert.NotEqual(t, m.epoch, e.Epoch, "the fenced activation (epoch %d) appended %s of step %q after the fence", m.epoch, e.Kind, e.StepId)
	}
	succeeded := func(id string) bool { return m.steps[id].GetStatus() == messages.StepSucceeded }
	committedByFenced := func(id string) bool { return succeeded(id) && m.steps[id].GetEpoch() <= m.epoch }
	for id, deps := range needs {
		extra := calls[id] - m.calls[id]
		allowed := 0
		if !succeeded(id) {
			allowed += newOwner
		}
		ready := !committedByFenced(id)
		for _, d := range deps {
			ready = ready && committedByFenced(d)
		}
		if ready {
			allowed++
		}
		assert.LessOrEqual(t, extra, allowed, "step %s was called %d times after the fence (runnable by the fenced activation: %v; succeeded at the fence: %v; the new owner may call it %d times)",
			id, extra, ready, succeeded(id), newOwner)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// chainNeeds is the dependency map of chain(key, uses, n, extra).
func chainNeeds(n int) map[string][]string {
	out := map[string][]string{}
	for i := 1; i <= n; i++ {
		id := stepName(i)
		out[id] = nil
		if i > 1 {
			out[id] = []string{stepName(i - 1)}
		}
	}
	return out
}

func stepName(i int) string { return fmt.Sprintf("s%02d", i) }

// calls returns a copy of the handler calls per step id.
func (c *counter) callsCopy() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// forgetfulStore is a store whose GetExecution, once armed, leaves out the succeeded step
// records of one execution: a rehydration that misses committed steps (a lagging read, a bug
// in the reader).
type forgetfulStore struct {
	store.Store
	armed chan string // receives the execution id to forget; buffered 1
}

func (f *forgetfulStore) GetExecution(ctx context.Context, id string) (*messages.Execution, []*messages.StepState, error) {
	x, steps, err := f.Store.GetExecution(ctx, id)
	if err != nil {
		return x, steps, err
	}
	select {
	case forget := <-f.armed:
		if forget != id {
			f.armed <- forget
			return x, steps, nil
		}
		var kept []*messages.StepState
		for _, st := range steps {
			if st.Status != messages.StepSucceeded {
				kept = append(kept, st)
			}
		}
		return x, kept, nil
	default:
		return x, steps, nil
	}
}

// TestExecution_rehydrationMissingCommittedStepsCommitsNothingTwice: an execution restarted on a
// read that misses its committed steps runs them again (nothing can stop the handler calls),
// but the store refuses every write over a succeeded step: no step record is replaced, no
// second success reaches the ledger, and the run still succeeds.
func TestExecution_rehydrationMissingCommittedStepsCommitsNothingTwice(t *testing.T) {
	for _, b := range testkit.Backends {
		t.Run(string(b), func(t *testing.T) {
			c := newCounter()
			c.delay = 30 * time.Millisecond
			fs := &forgetfulStore{Store: testkit.OpenStore(t, b, nil), armed: make(chan string, 1)}
			n, err := actors.Start(context.Background(), actors.Config{Store: fs, Handlers: registryWith(t, "count", c), NodeID: "test-node",
				PumpInterval: 10 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, RecoveryInterval: 100 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, n.Stop(context.Background())) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = n.PutPipeline(ctx, []byte(chain("six", "count", 6, "")))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "six", Snapshot: tenantSnap("acme")})
			require.NoError(t, err)
			var execID string
			testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
				r, err := n.GetRun(ctx, run.SharedRunId)
				require.NoError(t, err)
				execID = r.ExecutionId
				_, entries := ledgerKinds(t, n, run.SharedRunId)
				return len(succeededPerStep(entries)) >= 2
			}, "two steps committed")
			_, before, err := fs.Store.GetExecution(ctx, execID)
			require.NoError(t, err)
			fs.armed <- execID
			require.NoError(t, actors.InjectExecutionPanic(ctx, n, run.SharedRunId))
			done, err := n.Await(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
			require.Empty(t, fs.armed, "the restarted execution did not reload its steps")

			_, entries := ledgerKinds(t, n, run.SharedRunId)
			per := succeededPerStep(entries)
			require.Len(t, per, 6)
			for id, k := range per {
				require.Equal(t, 1, k, "step %s succeeded %d times in the ledger", id, k)
			}
			_, after, err := fs.Store.GetExecution(ctx, execID)
			require.NoError(t, err)
			final := map[string]*messages.StepState{}
			for _, st := range after {
				final[st.StepId] = st
			}
			rerun := 0
			for _, st := range before {
				if st.Status != messages.StepSucceeded {
					continue
				}
				require.True(t, proto.Equal(st, final[st.StepId]), "committed step %s was overwritten: %v, now %v", st.StepId, st, final[st.StepId])
				if c.count(st.StepId) > 1 {
					rerun++
				}
			}
			require.Positive(t, rerun, "no committed step ran again: the forgetful read was not exercised")
		})
	}
}
