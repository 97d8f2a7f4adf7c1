package actors_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// createFault is a store whose first CreateExecution fails: before it writes (the store went
// away) or after (the write landed and its answer was lost).
type createFault struct {
	store.Store
	writeFirst bool
	failed     atomic.Bool
}

func (s *createFault) CreateExecution(ctx context.Context, x *messages.Execution) error {
	if s.failed.CompareAndSwap(false, true) {
		if s.writeFirst {
			if err := s.Store.CreateExecution(ctx, x); err != nil {
				return err
			}
		}
		return errors.New("injected: connection reset by peer")
	}
	return s.Store.CreateExecution(ctx, x)
}

// createFaultLife is createFault for a store with store.ExecutionLifecycle: its first
// StartExecution (which creates the execution) fails the same way.
type createFaultLife struct{ *createFault }

func (s createFaultLife) StartExecution(ctx context.Context, st store.ExecutionStart) (store.StartResult, error) {
	life := s.Store.(store.ExecutionLifecycle)
	if s.failed.CompareAndSwap(false, true) {
		if s.writeFirst {
			if _, err := life.StartExecution(ctx, st); err != nil {
				return store.StartResult{}, err
			}
		}
		return store.StartResult{}, errors.New("injected: connection reset by peer")
	}
	return life.StartExecution(ctx, st)
}

func (s createFaultLife) FinishExecution(ctx context.Context, f store.ExecutionFinish) (store.FinishResult, error) {
	return s.Store.(store.ExecutionLifecycle).FinishExecution(ctx, f)
}

// TestExecution_failedCreateIsRetried: an activation whose first create of its execution
// failed creates it on its next load (and takes an execution its lost answer created as its
// own), so the run finishes with every step once instead of retrying forever to acquire an
// execution that does not exist. With store.ExecutionLifecycle the create is the start call
// that also marks the run.
func TestExecution_failedCreateIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name       string
		writeFirst bool
		life       bool
	}{{"before the write", false, false}, {"answer lost", true, false},
		{"lifecycle/before the write", false, true}, {"lifecycle/answer lost", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cf := &createFault{Store: testkit.OpenStore(t, testkit.BackendEmbedded, nil), writeFirst: tc.writeFirst}
			var st store.Store = cf
			if tc.life {
				st = createFaultLife{cf}
			}
			c := newCounter()
			n, err := actors.Start(context.Background(), actors.Config{NodeID: "n", Store: st, Handlers: registryWith(t, "count", c),
				PumpInterval: 10 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, RecoveryInterval: 100 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, n.Stop(context.Background())) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = n.PutPipeline(ctx, []byte(chain("created", "count", 2, "")))
			require.NoError(t, err)
			run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "created", Snapshot: tenantSnap("acme")})
			require.NoError(t, err)
			done, err := n.Await(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
			require.True(t, cf.failed.Load(), "the fault was injected")
			require.Equal(t, 1, c.count("s01"))
			require.Equal(t, 1, c.count("s02"))
		})
	}
}
