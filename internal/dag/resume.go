package dag

import "github.com/dairuntime/dair/messages"

// ResumePlan is what an execution does when it (re)starts from committed step states. Every
// list is in graph order.
type ResumePlan struct {
	// Succeeded lists the committed steps, never to be run again.
	Succeeded []string
	// Skipped lists the steps committed as skipped: final, never run.
	Skipped []string
	// Ready is what to start now, when not Failed: the steps without a final record (not
	// started, interrupted, or failed with attempts left) whose needs all succeeded. Attempts
	// count on from the record.
	Ready []string
	// Skip lists the steps that can never run and have no final record; the engine commits
	// them as skipped. When Failed: every step that never started or was waiting for a retry
	// (no record, or a pending one). Otherwise: the pending steps downstream of a skipped step.
	Skip []string
	// Done reports that every step succeeded or was skipped.
	Done bool
	// Failed reports that a step failed with no attempts left: the execution failed.
	Failed bool
	// FailedStep is the first (in graph order) terminally failed step when Failed.
	FailedStep string
}

// Resume plans a (re)start from committed step states, keyed by step id (a missing id is
// pending). maxAttempts returns a step's attempt budget; nil uses the step's
// Retry.Attempts(). Rules:
//   - succeeded: committed, listed in Succeeded, never rerun;
//   - skipped: final, counts toward Done;
//   - running or cancelled: interrupted by a crash or recovery, so rerun (the supervisor of
//     the execution bounds crash loops);
//   - failed: rerun while Attempts < maxAttempts, else the execution failed;
//   - pending: not started, or (Attempts > 0) waiting for a retry, which is rerun.
//
// Resume does not modify states.
func (g *Graph) Resume(states map[string]*messages.StepState, maxAttempts func(stepID string) int) ResumePlan {
	if maxAttempts == nil {
		maxAttempts = g.stepAttempts
	}
	var plan ResumePlan
	status := make(map[string]string, len(g.order))
	notStarted := make(map[string]bool, len(g.order))
	for _, id := range g.order {
		st := states[id]
		switch s := st.GetStatus(); s {
		case messages.StepSucceeded:
			plan.Succeeded = append(plan.Succeeded, id)
			status[id] = s
		case messages.StepSkipped:
			plan.Skipped = append(plan.Skipped, id)
			status[id] = s
		case messages.StepFailed:
			if int(st.GetAttempts()) >= maxAttempts(id) {
				status[id] = s
				if !plan.Failed {
					plan.Failed, plan.FailedStep = true, id
				}
			}
		case messages.StepRunning, messages.StepCancelled: // interrupted: rerun
		default: // pending or no record
			notStarted[id] = true
		}
	}
	plan.Done = len(plan.Succeeded)+len(plan.Skipped) == len(g.order)
	switch {
	case plan.Failed:
		for _, id := range g.order {
			if notStarted[id] {
				plan.Skip = append(plan.Skip, id)
			}
		}
	case !plan.Done:
		plan.Skip = g.skipBehind(status, notStarted)
		plan.Ready = g.Ready(status)
	}
	return plan
}

// skipBehind returns the not-started steps with a skipped need, transitively (a step listed
// counts as skipped for the steps after it). The order has needs before their dependents.
func (g *Graph) skipBehind(status map[string]string, notStarted map[string]bool) []string {
	var out []string
	skipped := map[string]bool{}
	for _, id := range g.order {
		if !notStarted[id] {
			continue
		}
		for _, n := range g.needs[id] {
			if status[n] == messages.StepSkipped || skipped[n] {
				skipped[id] = true
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// stepAttempts is the default attempt budget: the step's retry policy.
func (g *Graph) stepAttempts(id string) int {
	if s, ok := g.pipeline.Step(id); ok {
		return s.Retry.Attempts()
	}
	return 1
}
