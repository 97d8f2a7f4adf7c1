package controlplane_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// prestarter prepares starts on the instances it is given as its own, and records what the
// dispatcher told it.
type prestarter struct {
	st    store.Store
	local map[string]bool
	mu    sync.Mutex // guards the fields below
	asked []string   // run ids Prestart was asked for
	open  map[string]bool
	told  []store.StartResult
	// opened has, for each gate opened, whether the delivery's outcome was in the ledger.
	opened []bool
}

func (p *prestarter) Prestart(run *messages.SharedRun, instanceID string) (store.ExecutionStart, func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, run.SharedRunId)
	if !p.local[instanceID] {
		return store.ExecutionStart{}, nil, false
	}
	execID := "exec-" + run.SharedRunId
	p.open[execID] = true
	return store.ExecutionStart{
		Execution: &messages.Execution{ExecutionId: execID, SharedRunId: run.SharedRunId, RuntimeInstanceId: instanceID,
			LocalRunId: "lrun-" + run.SharedRunId, Epoch: 1, Status: messages.RunRunning, Snapshot: run.Snapshot},
		Entry: &messages.LedgerEntry{Kind: messages.KindExecutionStarted, ExecutionId: execID, RuntimeInstanceId: instanceID, Epoch: 1},
	}, func() { p.mu.Lock(); delete(p.open, execID); p.mu.Unlock() }, true
}

// Gate reports, when opened, whether the run's ledger held the delivery's outcome by then.
func (p *prestarter) Gate(run *messages.SharedRun, _ string) func() {
	return func() {
		entries, err := p.st.ReadLedger(context.Background(), run.SharedRunId, 0, 0)
		recorded := false
		for _, e := range entries {
			recorded = recorded || e.Kind == messages.KindDispatch || e.Kind == messages.KindDispatchFailed
		}
		p.mu.Lock()
		p.opened = append(p.opened, err == nil && recorded)
		p.mu.Unlock()
	}
}

func (p *prestarter) Started(_ *messages.SharedRun, res store.StartResult) {
	p.mu.Lock()
	p.told = append(p.told, res)
	p.mu.Unlock()
}

// TestDispatcher_prestart: over the embedded store (a store.StartingAssigner) the assignment of
// a new run to an instance of this process carries its execution's start: one write leaves
// the run running under the execution at epoch 1, and the delivery names the execution. A
// delivery that fails puts the run back in the queue with its execution kept (the next
// activation takes it over at a new epoch) and frees the slot; a run that has an execution
// already, or goes to an instance of another process, is assigned as before.
func TestDispatcher_prestart(t *testing.T) {
	cases := []struct {
		name      string
		local     bool
		recovered bool // the run names an execution already
		deliverOK bool
		// want
		status    string
		execution bool // the run names its prestarted execution
		asked     bool
		holds     int
		queued    int64
	}{
		{name: "delivered", local: true, deliverOK: true, status: messages.RunRunning, execution: true, asked: true, holds: 1},
		{name: "delivery failed", local: true, status: messages.RunQueued, execution: true, asked: true, queued: 1},
		{name: "instance of another process", deliverOK: true, status: messages.RunDispatched, asked: true, holds: 1},
		{name: "recovered run", local: true, recovered: true, deliverOK: true, status: messages.RunDispatched, holds: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := openStore(t)
			p := newPlane(t, st)
			p.router.ok, p.router.retryable, p.router.reason = tc.deliverOK, true, "instance-draining"
			pre := &prestarter{st: st, local: map[string]bool{"acme-runtime-1": tc.local}, open: map[string]bool{}}
			d, err := controlplane.NewDispatcher(st, controlplane.DispatcherConfig{ReservationTTL: time.Minute, Router: p.router,
				Ledger: ledger.NewWriter(st, ledger.WriterConfig{}), Tenants: p.tenants, Scaler: p.scaler, Prestarter: pre})
			require.NoError(t, err)
			require.NoError(t, st.PutTenant(ctx, dedicated("acme")))
			require.NoError(t, st.PutInstance(ctx, ready("acme-runtime-1", "acme", 1), time.Minute))
			run := queued(t, st, "r1", "acme")
			if tc.recovered {
				_, err := st.UpdateRun(ctx, "r1", func(r *messages.SharedRun) error { r.ExecutionId = "exec-earlier"; return nil })
				require.NoError(t, err)
				run.ExecutionId = "exec-earlier"
			}
			_, _, err = d.Cycle(ctx, "pump-cp")
			require.NoError(t, err)

			got, err := st.GetRun(ctx, "r1")
			require.NoError(t, err)
			require.Equal(t, tc.status, got.Status, got.FailureReason)
			pre.mu.Lock()
			require.Equal(t, tc.asked, len(pre.asked) > 0, "asked %v", pre.asked)
			require.Empty(t, pre.open, "every preparation is forgotten once the delivery answered")
			told := pre.told
			require.Equal(t, []bool{true}, pre.opened, "the delivery's gate opens once, after its outcome is in the ledger")
			pre.mu.Unlock()
			p.router.mu.Lock()
			require.Len(t, p.router.dispatch, 1)
			delivered := p.router.dispatch[0]
			p.router.mu.Unlock()
			if tc.execution {
				require.Equal(t, fmt.Sprint("exec-r1 lrun-r1 acme-runtime-1"), fmt.Sprint(got.ExecutionId, " ", got.LocalRunId, " ", got.AssignedRuntimeInstanceId))
				require.Equal(t, "exec-r1", delivered.ExecutionId, "the delivery names the started execution")
				x, _, err := st.GetExecution(ctx, "exec-r1")
				require.NoError(t, err)
				require.EqualValues(t, 1, x.Epoch)
				require.Len(t, told, 1)
				require.Equal(t, messages.KindExecutionStarted, told[0].Entry.GetKind())
				ks := kinds(t, st, "r1")
				require.Equal(t, []string{messages.KindAdmission, messages.KindReservation, messages.KindExecutionStarted}, ks[:3],
					"the start follows the decision in the same write")
			} else {
				require.Equal(t, run.ExecutionId, got.ExecutionId)
				require.Empty(t, told)
				_, _, err := st.GetExecution(ctx, "exec-r1")
				require.ErrorIs(t, err, store.ErrNotFound)
			}
			n, err := st.ReservationCount(ctx, "acme-runtime-1")
			require.NoError(t, err)
			require.Equal(t, tc.holds, n)
			pending, _, err := st.QueueDepth(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.queued, pending)
		})
	}
}
