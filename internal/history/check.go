package history

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/messages"
)

// Reasons of CheckCompat's divergences (each Divergence.Reason starts with one).
const (
	ReasonStepAdded     = "step-added"
	ReasonStepRemoved   = "step-removed"
	ReasonReordered     = "reordered"
	ReasonHandler       = "handler-changed"
	ReasonWithChanged   = "with-changed"
	ReasonRenderFailed  = "render-failed"
	ReasonInputRejected = "input-rejected"
)

// CheckCompat reports whether replaying the recorded execution in (its pinned Pipeline and
// Graph, steps and ledger) against the definition next would diverge, and where:
//   - "step-added": next has a step the execution's pipeline did not;
//   - "step-removed": a step the execution started is not in next;
//   - "reordered": a started step's needs differ (it would run in another order);
//   - "handler-changed": a started step uses another handler;
//   - "with-changed": a started step's `with`, rendered from the recorded input and outputs,
//     differs from the input recorded when it started;
//   - "render-failed": the recorded outputs no longer render a started step's templates;
//   - "input-rejected": next's input_schema refuses the execution's input.
//
// Retry policies and timeouts are not compared: they do not change what a step computes.
// CheckCompat is pure and linear in the pipelines, steps and ledger.
func CheckCompat(in ReplayInput, next *dag.Pipeline, nextGraph *dag.Graph) Report {
	r := Report{ExecutionID: in.Execution.GetExecutionId()}
	add := func(step, format string, args ...any) {
		r.Divergences = append(r.Divergences, Divergence{StepID: step, Reason: fmt.Sprintf(format, args...)})
	}
	if err := next.CheckInput(in.Execution.GetInput()); err != nil {
		add("", "%s: %v", ReasonInputRejected, err)
	}
	started := startedSteps(in)
	for _, id := range nextGraph.Order() {
		if _, ok := in.Pipeline.Step(id); !ok {
			add(id, "%s: the execution's pipeline has no step %q", ReasonStepAdded, id)
		}
	}
	var input any
	if len(in.Execution.GetInput()) > 0 && json.Unmarshal(in.Execution.GetInput(), &input) != nil {
		input = nil
	}
	outputs := recordedOutputs(in.Steps)
	tenant := in.Execution.GetSnapshot().GetTenantId()
	for _, id := range in.Graph.Order() {
		rec, ok := started[id]
		if !ok {
			continue
		}
		old, _ := in.Pipeline.Step(id)
		now, ok := next.Step(id)
		if !ok {
			add(id, "%s: the execution ran it; the new definition has no such step", ReasonStepRemoved)
			continue
		}
		if was, is := in.Graph.Needs(id), nextGraph.Needs(id); !slices.Equal(was, is) {
			add(id, "%s: needs [%s], was [%s]", ReasonReordered, strings.Join(is, ", "), strings.Join(was, ", "))
			continue
		}
		if old.Uses != now.Uses {
			add(id, "%s: uses %s, was %s", ReasonHandler, now.Uses, old.Uses)
			continue
		}
		scope := dag.Scope{Input: input, Steps: outputs, TenantID: tenant, ExecutionID: in.Execution.GetExecutionId()}
		with, err := dag.RenderWith(now.With, scope)
		switch {
		case err != nil && renders(old.With, scope):
			add(id, "%s: %v", ReasonRenderFailed, err)
		case err != nil:
			// The step failed to render in the execution too: the new definition fails it the same way.
		case rec != "" && rec != InputHash(with):
			add(id, "%s: its rendered with differs from the recorded input", ReasonWithChanged)
		}
	}
	r.Diverged = len(r.Divergences) > 0
	return r
}

// renders reports whether with renders in scope.
func renders(with map[string]any, scope dag.Scope) bool {
	_, err := dag.RenderWith(with, scope)
	return err == nil
}

// startedSteps maps each step the execution started to the input hash recorded at its last
// start ("" when none was recorded).
func startedSteps(in ReplayInput) map[string]string {
	out := map[string]string{}
	for _, e := range in.Ledger {
		if e.Kind != messages.KindStepStarted || (e.ExecutionId != "" && e.ExecutionId != in.Execution.GetExecutionId()) {
			continue
		}
		var d struct {
			InputHash string `json:"input_hash"`
		}
		if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) != nil {
			d.InputHash = ""
		}
		out[e.StepId] = d.InputHash
	}
	for _, s := range in.Steps {
		if _, ok := out[s.StepId]; !ok && s.Status != messages.StepPending && s.Status != messages.StepSkipped && s.Status != "" {
			out[s.StepId] = ""
		}
	}
	return out
}

// recordedOutputs returns the decoded outputs of the succeeded steps.
func recordedOutputs(steps []*messages.StepState) map[string]any {
	out := map[string]any{}
	for _, s := range steps {
		if s.Status != messages.StepSucceeded {
			continue
		}
		var v any
		if len(s.Output) > 0 && json.Unmarshal(s.Output, &v) != nil {
			v = string(s.Output)
		}
		out[s.StepId] = v
	}
	return out
}
