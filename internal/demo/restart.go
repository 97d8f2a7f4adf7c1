package demo

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// crashAndRestart runs two sleep chains, simulates a crash mid-way (closes the store under the
// running node, then stops the node in-process), starts a new node on the same store and
// follows the chains to the end. It returns an error wrapping ErrNoResume when a chain did not
// finish under the execution id it had before the crash, or when a step it had committed
// before the crash ran again (a handler call counted by the demo) or had its step record
// replaced.
func (d *demo) crashAndRestart(ctx context.Context) error {
	d.p.section("4. Crash and restart mid-run")
	d.p.printf("two %d-step sleep chains (%s per step); the node crashes once each has %d steps committed\n\n",
		chainSteps, chainStepTime, crashAfter)
	chains, err := d.startChains(ctx)
	if err != nil {
		return err
	}
	was, err := d.chainsAtCrash(ctx, chains)
	if err != nil {
		return err
	}
	incarnation, err := d.crash(chains, was)
	if err != nil {
		return err
	}
	if err := d.startNode(ctx); err != nil {
		return err
	}
	d.p.printf("\n%s\n\n", d.p.bold(fmt.Sprintf("RESTART: new node %s (incarnation %s, was %s) on the same store;\nrecovery takes over once the crashed node's recovery lease lapses, finds its instances gone and requeues their runs",
		d.node.ID(), d.node.Incarnation(), incarnation)))
	if err := d.follow(ctx, chains, allTerminal(chains)); err != nil {
		return err
	}
	d.p.printf("\n")
	return d.checkResumed(ctx, chains, was)
}

// chainAtCrash is what a chain looked like just before the crash.
type chainAtCrash struct {
	status, execID string
	steps          int
	committed      []*messages.StepState // succeeded step records at the crash
	calls          map[string]int        // handler calls of each committed step, by step id
}

// startChains submits the two chains and follows them until each has crashAfter steps
// committed (or ended).
func (d *demo) startChains(ctx context.Context) ([]*tracked, error) {
	var chains []*tracked
	for _, tenant := range []string{"default", "tenant-a"} {
		t, err := d.submit(ctx, tenant, chainKey, map[string]any{})
		if err != nil {
			return nil, err
		}
		chains = append(chains, t)
	}
	d.p.printf("\n")
	err := d.follow(ctx, chains, func() bool {
		for _, t := range chains {
			if !t.terminal() && t.succeeded < crashAfter {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return chains, nil
}

// chainsAtCrash records each chain's run and committed steps, by shared run id.
func (d *demo) chainsAtCrash(ctx context.Context, chains []*tracked) (map[string]*chainAtCrash, error) {
	was := map[string]*chainAtCrash{}
	for _, t := range chains {
		run, err := d.node.GetRun(ctx, t.id)
		if err != nil {
			return nil, fmt.Errorf("demo: get run %s: %w", t.id, err)
		}
		steps, err := d.node.RunSteps(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("demo: get steps of %s: %w", t.id, err)
		}
		b := &chainAtCrash{status: run.Status, execID: run.ExecutionId, steps: countSucceeded(steps), calls: map[string]int{}}
		for _, st := range steps {
			if st.Status == messages.StepSucceeded {
				b.committed = append(b.committed, st)
			}
		}
		was[t.id] = b
	}
	// Read after the records: every committed step had been called by now, so any later call
	// of one is a re-run.
	for _, b := range was {
		for _, st := range b.committed {
			b.calls[st.StepId] = d.calls.count(b.execID, st.StepId)
		}
	}
	return was, nil
}

// crash closes the store under the running node, stops the node and prints the chains as
// they were; it returns the crashed node's incarnation.
func (d *demo) crash(chains []*tracked, was map[string]*chainAtCrash) (string, error) {
	d.p.printf("\n%s\n", d.p.bold("CRASH (simulated in process): the store is closed under the running node (nothing more is persisted), then the node is stopped"))
	incarnation := d.node.Incarnation()
	if err := d.st.Close(); err != nil {
		return "", fmt.Errorf("demo: cut the store off: %w", err)
	}
	d.st = nil
	if err := d.shutdown(); err != nil {
		// The node fails to flush into the closed store: that is the crash.
		d.p.printf("  (node teardown after the crash: %s)\n", oneLine(err.Error(), 100))
	}
	tw := d.p.table()
	d.p.row(tw, "  RUN", "TENANT", "STATUS AT CRASH", "STEPS COMMITTED", "EXECUTION")
	for _, t := range chains {
		b := was[t.id]
		d.p.row(tw, "  "+short(t.id, 12), t.tenant, b.status, fmt.Sprintf("%d/%d", b.steps, t.total), b.execID)
	}
	d.p.flush(tw)
	return incarnation, nil
}

// checkResumed prints, for each chain, whether it finished under its execution id of before
// the crash, recovered, and left its committed steps alone; it returns an error wrapping
// ErrNoResume naming the chains that did not.
func (d *demo) checkResumed(ctx context.Context, chains []*tracked, was map[string]*chainAtCrash) error {
	var bad []string
	tw := d.p.table()
	d.p.row(tw, "  RUN", "TENANT", "EXECUTION BEFORE", "EXECUTION AFTER", "SAME", "RECOVERY IN LEDGER", "COMMITTED STEPS RE-RUN", "STATUS")
	for _, t := range chains {
		run, err := d.node.GetRun(ctx, t.id)
		if err != nil {
			return fmt.Errorf("demo: get run %s: %w", t.id, err)
		}
		b := was[t.id]
		same := b.execID != "" && run.ExecutionId == b.execID
		for _, id := range t.execIDs {
			same = same && id == b.execID
		}
		rerun, err := d.rerunSteps(ctx, run, b)
		if err != nil {
			return err
		}
		ok := same && t.recovered && !messages.IsTerminalRun(b.status) && len(b.committed) > 0 && len(rerun) == 0
		if !ok {
			bad = append(bad, short(t.id, 12))
		}
		reran := fmt.Sprintf("%d of %d", len(rerun), len(b.committed))
		if len(rerun) > 0 {
			reran += " (" + strings.Join(rerun, " ") + ")"
		}
		d.p.row(tw, "  "+short(t.id, 12), t.tenant, b.execID, run.ExecutionId, yesNo(same), yesNo(t.recovered), reran, run.Status)
	}
	d.p.flush(tw)
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrNoResume, strings.Join(bad, ", "))
	}
	d.p.printf("every interrupted run resumed from its committed steps with the same execution id\n" +
		"(no step committed before the crash ran again: its record is unchanged and its handler was not called)\n")
	return nil
}

// rerunSteps returns the ids of the steps committed before the crash whose record changed or
// whose handler was called again since.
func (d *demo) rerunSteps(ctx context.Context, run *messages.SharedRun, b *chainAtCrash) ([]string, error) {
	steps, err := d.node.RunSteps(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("demo: get steps of %s: %w", run.SharedRunId, err)
	}
	now := map[string]*messages.StepState{}
	for _, st := range steps {
		now[st.StepId] = st
	}
	var rerun []string
	for _, st := range b.committed {
		if !proto.Equal(st, now[st.StepId]) || d.calls.count(b.execID, st.StepId) != b.calls[st.StepId] {
			rerun = append(rerun, st.StepId)
		}
	}
	return rerun, nil
}

// replay replays the first resumed chain's execution and prints the report.
func (d *demo) replay(ctx context.Context) error {
	d.p.section("5. Replay a finished execution")
	var pick *tracked
	for _, t := range d.runs {
		if t.pipeline == chainKey && len(t.execIDs) > 0 {
			pick = t
			break
		}
	}
	if pick == nil {
		for _, t := range d.runs {
			if len(t.execIDs) > 0 {
				pick = t
				break
			}
		}
	}
	if pick == nil {
		return fmt.Errorf("%w: no execution to replay", ErrDiverged)
	}
	execID := pick.execIDs[len(pick.execIDs)-1]
	rep, err := d.node.Replay(ctx, execID)
	if err != nil {
		return fmt.Errorf("demo: replay %s: %w", execID, err)
	}
	note := ""
	if pick.recovered {
		note = ", resumed after the crash"
	}
	d.p.printf("execution   %s (%s for %s%s)\n", execID, pick.pipeline, pick.tenant, note)
	d.p.printf("replayed    %d steps from their recorded outputs; no handler was called\n", rep.Replayed)
	d.p.printf("checked     pipeline hash, inputs re-rendered from recorded outputs, one commit per step, dependency order\n")
	d.p.printf("diverged    %t\n", rep.Diverged)
	for _, dv := range rep.Divergences {
		d.p.printf("  divergence at %s: %s\n", dv.StepID, dv.Reason)
	}
	if rep.Diverged {
		return fmt.Errorf("%w: execution %s: %d divergences", ErrDiverged, execID, len(rep.Divergences))
	}
	return nil
}
