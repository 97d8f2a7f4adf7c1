package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/messages"
)

// Divergence is one difference between a replay and the recorded execution.
type Divergence struct {
	StepID string
	Reason string
}

// Report is the outcome of a replay.
type Report struct {
	ExecutionID string
	Diverged    bool
	Divergences []Divergence
	// Replayed counts the steps whose recorded output was fed forward.
	Replayed int
}

// ReplayInput is everything a replay reads; it calls no handler.
type ReplayInput struct {
	Pipeline  *dag.Pipeline
	Graph     *dag.Graph
	Execution *messages.Execution
	Steps     []*messages.StepState
	Ledger    []*messages.LedgerEntry
}

// InputHash is the fingerprint of a step's rendered `with`, recorded in each step_started
// ledger entry ("input_hash") and checked by Replay. The engine and Replay must agree on it.
func InputHash(with map[string]any) string {
	b, err := json.Marshal(with)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Replay re-walks the execution's DAG in deterministic order, re-renders every step's inputs
// from the recorded outputs of the steps before it, and compares with the record:
//   - "pipeline-changed": the execution's pinned hash is not the pipeline's;
//   - "not-succeeded": a step of a succeeded execution has no succeeded state;
//   - "input-diverged": the re-rendered input differs from the input recorded at its start;
//   - "render-failed": the recorded outputs no longer render the step's templates;
//   - "duplicate-commit" / "missing-commit": the ledger does not hold exactly one
//     step_succeeded for a succeeded step;
//   - "order-violation": a step started before a dependency succeeded.
func Replay(in ReplayInput) Report {
	r := Report{ExecutionID: in.Execution.GetExecutionId()}
	add := func(step, reason string) {
		r.Divergences = append(r.Divergences, Divergence{StepID: step, Reason: reason})
	}
	if in.Execution.GetPipelineHash() != in.Pipeline.Hash {
		add("", fmt.Sprintf("pipeline-changed: execution pinned %s, pipeline is %s", in.Execution.GetPipelineHash(), in.Pipeline.Hash))
	}
	states := map[string]*messages.StepState{}
	for _, s := range in.Steps {
		states[s.StepId] = s
	}
	succeededSeq := map[string]int64{}
	successes := map[string]int{}
	lastStart := map[string]*messages.LedgerEntry{}
	firstStart := map[string]int64{}
	for _, e := range in.Ledger {
		if in.Execution != nil && e.ExecutionId != "" && e.ExecutionId != in.Execution.ExecutionId {
			continue
		}
		switch e.Kind {
		case messages.KindStepSucceeded:
			successes[e.StepId]++
			if _, ok := succeededSeq[e.StepId]; !ok {
				succeededSeq[e.StepId] = e.Seq
			}
		case messages.KindStepStarted:
			lastStart[e.StepId] = e
			if _, ok := firstStart[e.StepId]; !ok {
				firstStart[e.StepId] = e.Seq
			}
		}
	}
	var input any
	if len(in.Execution.GetInput()) > 0 {
		if err := json.Unmarshal(in.Execution.Input, &input); err != nil {
			add("", "input-unreadable: "+err.Error())
		}
	}
	outputs := map[string]any{}
	tenant := in.Execution.GetSnapshot().GetTenantId()
	for _, id := range in.Graph.Order() {
		st := states[id]
		if st == nil || st.Status != messages.StepSucceeded {
			if in.Execution.GetStatus() == messages.RunSucceeded {
				add(id, "not-succeeded")
			}
			continue
		}
		switch n := successes[id]; {
		case n == 0:
			add(id, "missing-commit")
		case n > 1:
			add(id, fmt.Sprintf("duplicate-commit: %d step_succeeded entries", n))
		}
		for _, dep := range in.Graph.Needs(id) {
			if ds, ok := succeededSeq[dep]; ok {
				if fs, ok := firstStart[id]; ok && fs < ds {
					add(id, "order-violation: started before "+dep+" succeeded")
				}
			}
		}
		step, _ := in.Pipeline.Step(id)
		with, err := dag.RenderWith(step.With, dag.Scope{Input: input, Steps: outputs, TenantID: tenant, ExecutionID: in.Execution.GetExecutionId()})
		if err != nil {
			add(id, "render-failed: "+err.Error())
		} else if rec := lastStart[id]; rec != nil {
			var d struct {
				InputHash string `json:"input_hash"`
			}
			if json.Unmarshal(rec.Data, &d) == nil && d.InputHash != "" && d.InputHash != InputHash(with) {
				add(id, "input-diverged")
			}
		}
		var out any
		if len(st.Output) > 0 {
			if err := json.Unmarshal(st.Output, &out); err != nil {
				add(id, "output-unreadable")
			}
		}
		outputs[id] = out
		r.Replayed++
	}
	r.Diverged = len(r.Divergences) > 0
	return r
}
