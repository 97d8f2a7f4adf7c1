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
	rp := &replayer{in: in, r: Report{ExecutionID: in.Execution.GetExecutionId()}, led: indexLedger(in),
		outputs: map[string]any{}}
	if in.Execution.GetPipelineHash() != in.Pipeline.Hash {
		rp.add("", fmt.Sprintf("pipeline-changed: execution pinned %s, pipeline is %s", in.Execution.GetPipelineHash(), in.Pipeline.Hash))
	}
	states := map[string]*messages.StepState{}
	for _, s := range in.Steps {
		states[s.StepId] = s
	}
	if len(in.Execution.GetInput()) > 0 {
		if err := json.Unmarshal(in.Execution.Input, &rp.input); err != nil {
			rp.add("", "input-unreadable: "+err.Error())
		}
	}
	for _, id := range in.Graph.Order() {
		st := states[id]
		if st == nil || st.Status != messages.StepSucceeded {
			if in.Execution.GetStatus() == messages.RunSucceeded {
				rp.add(id, "not-succeeded")
			}
			continue
		}
		rp.checkLedger(id)
		rp.checkInput(id)
		var out any
		if len(st.Output) > 0 {
			if err := json.Unmarshal(st.Output, &out); err != nil {
				rp.add(id, "output-unreadable")
			}
		}
		rp.outputs[id] = out
		rp.r.Replayed++
	}
	rp.r.Diverged = len(rp.r.Divergences) > 0
	return rp.r
}

// replayer is the state of one Replay.
type replayer struct {
	in      ReplayInput
	r       Report
	led     ledgerIndex
	input   any            // the execution's input, decoded
	outputs map[string]any // recorded outputs of the steps replayed so far
}

func (rp *replayer) add(step, reason string) {
	rp.r.Divergences = append(rp.r.Divergences, Divergence{StepID: step, Reason: reason})
}

// checkLedger checks that succeeded step id has exactly one step_succeeded entry and did not
// start before a dependency succeeded.
func (rp *replayer) checkLedger(id string) {
	switch n := rp.led.successes[id]; {
	case n == 0:
		rp.add(id, "missing-commit")
	case n > 1:
		rp.add(id, fmt.Sprintf("duplicate-commit: %d step_succeeded entries", n))
	}
	for _, dep := range rp.in.Graph.Needs(id) {
		if ds, ok := rp.led.succeededSeq[dep]; ok {
			if fs, ok := rp.led.firstStart[id]; ok && fs < ds {
				rp.add(id, "order-violation: started before "+dep+" succeeded")
			}
		}
	}
}

// checkInput re-renders step id's inputs from the recorded outputs before it and compares
// them with the input hash recorded at its last start.
func (rp *replayer) checkInput(id string) {
	step, _ := rp.in.Pipeline.Step(id)
	with, err := dag.RenderWith(step.With, dag.Scope{Input: rp.input, Steps: rp.outputs,
		TenantID: rp.in.Execution.GetSnapshot().GetTenantId(), ExecutionID: rp.in.Execution.GetExecutionId()})
	if err != nil {
		rp.add(id, "render-failed: "+err.Error())
		return
	}
	rec := rp.led.lastStart[id]
	if rec == nil {
		return
	}
	var d struct {
		InputHash string `json:"input_hash"`
	}
	if json.Unmarshal(rec.Data, &d) == nil && d.InputHash != "" && d.InputHash != InputHash(with) {
		rp.add(id, "input-diverged")
	}
}

// ledgerIndex is what Replay reads from the execution's ledger entries, by step id.
type ledgerIndex struct {
	successes    map[string]int                   // step_succeeded entries
	succeededSeq map[string]int64                 // seq of the first step_succeeded
	firstStart   map[string]int64                 // seq of the first step_started
	lastStart    map[string]*messages.LedgerEntry // the last step_started
}

// indexLedger indexes the entries of in.Ledger that belong to the execution (or to none).
func indexLedger(in ReplayInput) ledgerIndex {
	x := ledgerIndex{successes: map[string]int{}, succeededSeq: map[string]int64{},
		firstStart: map[string]int64{}, lastStart: map[string]*messages.LedgerEntry{}}
	for _, e := range in.Ledger {
		if in.Execution != nil && e.ExecutionId != "" && e.ExecutionId != in.Execution.ExecutionId {
			continue
		}
		switch e.Kind {
		case messages.KindStepSucceeded:
			x.successes[e.StepId]++
			if _, ok := x.succeededSeq[e.StepId]; !ok {
				x.succeededSeq[e.StepId] = e.Seq
			}
		case messages.KindStepStarted:
			x.lastStart[e.StepId] = e
			if _, ok := x.firstStart[e.StepId]; !ok {
				x.firstStart[e.StepId] = e.Seq
			}
		}
	}
	return x
}
