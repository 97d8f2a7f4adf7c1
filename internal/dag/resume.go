package dag

import "github.com/dairuntime/dair/messages"

// ResumePlan is what an execution does when it (re)starts from committed step states.
type ResumePlan struct {
	// Succeeded lists the committed steps, never to be run again, in graph order.
	Succeeded []string
	// Rerun lists the steps that were interrupted (running or cancelled) or failed with
	// attempts left: they run again. In graph order.
	Rerun []string
	// Ready is what to start now: pending and Rerun steps whose needs all succeeded, in graph
	// order. Empty when Failed.
	Ready []string
	// Blocked lists pending steps that can never run because a need was skipped (see
	// Graph.Blocked); the engine marks them skipped.
	Blocked []string
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
//   - running or cancelled: interrupted by a crash, pause or recovery, so rerun (the engine
//     bounds crash loops through its own recovery accounting);
//   - failed: rerun while Attempts < maxAttempts, else the execution failed.
//
// Resume does not modify states.
func (g *Graph) Resume(states map[string]*messages.StepState, maxAttempts func(stepID string) int) ResumePlan {
	if maxAttempts == nil {
		maxAttempts = g.stepAttempts
	}
	var plan ResumePlan
	status := make(map[string]string, len(g.order))
	done := true
	for _, id := range g.order {
		st := states[id]
		var s string
		if st != nil {
			s = st.GetStatus()
		}
		switch s {
		case messages.StepSucceeded:
			plan.Succeeded = append(plan.Succeeded, id)
			status[id] = s
			continue
		case messages.StepSkipped:
			status[id] = s
			continue
		case messages.StepRunning, messages.StepCancelled:
			plan.Rerun = append(plan.Rerun, id)
		case messages.StepFailed:
			if int(st.GetAttempts()) < maxAttempts(id) {
				plan.Rerun = append(plan.Rerun, id)
			} else {
				status[id] = s
				if !plan.Failed {
					plan.Failed, plan.FailedStep = true, id
				}
			}
		}
		done = false
	}
	plan.Done = done
	if plan.Failed || done {
		return plan
	}
	plan.Ready = g.Ready(status)
	plan.Blocked = g.Blocked(status)
	return plan
}

// stepAttempts is the default attempt budget: the step's retry policy.
func (g *Graph) stepAttempts(id string) int {
	if s, ok := g.pipeline.Step(id); ok {
		return s.Retry.Attempts()
	}
	return 1
}
