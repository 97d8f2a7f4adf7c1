package history_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/messages"
)

const pipe = `
key: p
steps:
  - id: a
    uses: echo
    with: {value: "{{ .input.x }}"}
  - id: b
    uses: echo
    needs: [a]
    with: {value: "got {{ .steps.a.output }}"}
`

func load(t *testing.T) (*dag.Pipeline, *dag.Graph) {
	t.Helper()
	p, err := dag.Load([]byte(pipe), nil)
	require.NoError(t, err)
	g, err := dag.Compile(p)
	require.NoError(t, err)
	return p, g
}

func hashOf(t *testing.T, p *dag.Pipeline, id string, scope dag.Scope) string {
	t.Helper()
	st, _ := p.Step(id)
	w, err := dag.RenderWith(st.With, scope)
	require.NoError(t, err)
	return history.InputHash(w)
}

// recorded builds a consistent record of a succeeded execution; mutate rewrites it per case.
func recorded(t *testing.T, p *dag.Pipeline) (*messages.Execution, []*messages.StepState, []*messages.LedgerEntry) {
	ex := &messages.Execution{ExecutionId: "e1", SharedRunId: "r1", PipelineHash: p.Hash, Status: messages.RunSucceeded,
		Input: []byte(`{"x":"1"}`), Snapshot: &messages.ExecutionContextSnapshot{TenantId: "t"}}
	scope := dag.Scope{Input: map[string]any{"x": "1"}, Steps: map[string]any{}, TenantID: "t", ExecutionID: "e1"}
	ha := hashOf(t, p, "a", scope)
	scope.Steps["a"] = "1"
	hb := hashOf(t, p, "b", scope)
	steps := []*messages.StepState{
		{StepId: "a", Status: messages.StepSucceeded, Output: []byte(`"1"`)},
		{StepId: "b", Status: messages.StepSucceeded, Output: []byte(`"got 1"`)},
	}
	data := func(h string) []byte { b, _ := json.Marshal(map[string]string{"input_hash": h}); return b }
	led := []*messages.LedgerEntry{
		{Seq: 1, Kind: messages.KindStepStarted, StepId: "a", ExecutionId: "e1", Data: data(ha), At: 1},
		{Seq: 2, Kind: messages.KindStepSucceeded, StepId: "a", ExecutionId: "e1", At: 2},
		{Seq: 3, Kind: messages.KindStepStarted, StepId: "b", ExecutionId: "e1", Data: data(hb), At: 3},
		{Seq: 4, Kind: messages.KindStepSucceeded, StepId: "b", ExecutionId: "e1", At: 4},
		{Seq: 5, Kind: messages.KindRunSucceeded, ExecutionId: "e1", At: 5},
	}
	return ex, steps, led
}

func TestReplay_divergences(t *testing.T) {
	p, g := load(t)
	cases := []struct {
		name   string
		mutate func(ex *messages.Execution, steps []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry
		want   []string // reasons (prefix) in order; empty = no divergence
	}{
		{"faithful record", nil, nil},
		{"pipeline changed", func(ex *messages.Execution, _ []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry {
			ex.PipelineHash = "other"
			return led
		}, []string{"pipeline-changed"}},
		{"output changed so b's input diverges", func(_ *messages.Execution, s []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry {
			s[0].Output = []byte(`"2"`)
			return led
		}, []string{"input-diverged"}},
		{"step not succeeded", func(_ *messages.Execution, s []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry {
			s[1].Status = messages.StepFailed
			return led
		}, []string{"not-succeeded"}},
		{"duplicate commit", func(_ *messages.Execution, _ []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry {
			return append(led, &messages.LedgerEntry{Seq: 6, Kind: messages.KindStepSucceeded, StepId: "a", ExecutionId: "e1"})
		}, []string{"duplicate-commit"}},
		{"missing commit", func(_ *messages.Execution, _ []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry {
			return append(led[:3:3], led[4:]...)
		}, []string{"missing-commit"}},
		{"order violation", func(_ *messages.Execution, _ []*messages.StepState, led []*messages.LedgerEntry) []*messages.LedgerEntry {
			led[2].Seq = 0 // b started before a succeeded
			return led
		}, []string{"order-violation"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex, steps, led := recorded(t, p)
			if tc.mutate != nil {
				led = tc.mutate(ex, steps, led)
			}
			r := history.Replay(history.ReplayInput{Pipeline: p, Graph: g, Execution: ex, Steps: steps, Ledger: led})
			require.Equal(t, len(tc.want) > 0, r.Diverged, r.Divergences)
			require.Len(t, r.Divergences, len(tc.want), r.Divergences)
			for i, w := range tc.want {
				require.Contains(t, r.Divergences[i].Reason, w)
			}
		})
	}
}

func TestTrace_spans(t *testing.T) {
	p, _ := load(t)
	_, _, led := recorded(t, p)
	led = append([]*messages.LedgerEntry{{Seq: 0, Kind: messages.KindAdmission, Reason: "most-available-slots", At: 0}}, led...)
	spans := history.Trace(led)
	require.Equal(t, "run", spans[0].Kind)
	require.Equal(t, messages.KindRunSucceeded, spans[0].Attributes["status"])
	var steps, events int
	for _, s := range spans[1:] {
		switch s.Kind {
		case "step":
			steps++
			require.Equal(t, false, s.Attributes["open"])
			require.Equal(t, "succeeded", s.Attributes["status"])
			require.True(t, !s.End.Before(s.Start))
		case "event":
			events++
		}
	}
	require.Equal(t, 2, steps)
	require.Equal(t, 1, events)
	require.Nil(t, history.Trace(nil))
}
