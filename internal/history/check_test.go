package history_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/history"
	"github.com/dairuntime/dair/messages"
)

func TestCheckCompat(t *testing.T) {
	p, g := load(t)
	cases := []struct {
		name string
		next string
		want []string // "step: reason prefix" in order; empty = compatible
	}{
		{"same definition", pipe, nil},
		{"retry and timeout only", pipe + "    retry: {max_attempts: 3}\n    timeout: 5s\n", nil},
		{"with changed", strings.Replace(pipe, `"got {{`, `"now {{`, 1), []string{"b: with-changed"}},
		{"step added", pipe + "  - id: c\n    uses: echo\n", []string{"c: step-added"}},
		{"step removed", "key: p\nsteps:\n  - id: a\n    uses: echo\n    with: {value: \"{{ .input.x }}\"}\n",
			[]string{"b: step-removed"}},
		{"reordered", "key: p\nsteps:\n  - id: b\n    uses: echo\n    with: {value: \"got 1\"}\n  - id: a\n    uses: echo\n" +
			"    needs: [b]\n    with: {value: \"{{ .input.x }}\"}\n", []string{"a: reordered", "b: reordered"}},
		{"handler changed", strings.Replace(pipe, "uses: echo\n    needs", "uses: sleep\n    needs", 1), []string{"b: handler-changed"}},
		{"render fails", strings.Replace(pipe, ".steps.a.output", ".steps.a.output.body", 1), []string{"b: render-failed"}},
		{"input rejected", strings.Replace(pipe, "steps:", "input_schema: {required: [y]}\nsteps:", 1), []string{": input-rejected"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, err := dag.Load([]byte(tc.next), nil)
			require.NoError(t, err)
			ng, err := dag.Compile(next)
			require.NoError(t, err)
			ex, steps, led := recorded(t, p)
			r := history.CheckCompat(history.ReplayInput{Pipeline: p, Graph: g, Execution: ex, Steps: steps, Ledger: led}, next, ng)
			require.Equal(t, len(tc.want) > 0, r.Diverged, r.Divergences)
			require.Len(t, r.Divergences, len(tc.want), r.Divergences)
			for i, w := range tc.want {
				require.True(t, strings.HasPrefix(r.Divergences[i].StepID+": "+r.Divergences[i].Reason, w),
					"divergence %d = %+v, want %q", i, r.Divergences[i], w)
			}
		})
	}
}

// An execution whose step failed to render (its input lacked a field) is compatible with its
// own definition: the check reports only what the new definition would change.
func TestCheckCompat_stepThatFailedToRender(t *testing.T) {
	p, g := load(t)
	ex := &messages.Execution{ExecutionId: "e1", SharedRunId: "r1", PipelineHash: p.Hash, Status: messages.RunFailed,
		Input: []byte(`[1]`), Snapshot: &messages.ExecutionContextSnapshot{TenantId: "t"}}
	steps := []*messages.StepState{{StepId: "a", Status: messages.StepFailed, Error: "render with: template"}}
	led := []*messages.LedgerEntry{
		{Seq: 1, Kind: messages.KindStepFailed, StepId: "a", ExecutionId: "e1", At: 1},
		{Seq: 2, Kind: messages.KindRunFailed, ExecutionId: "e1", At: 2},
	}
	in := history.ReplayInput{Pipeline: p, Graph: g, Execution: ex, Steps: steps, Ledger: led}
	r := history.CheckCompat(in, p, g)
	require.False(t, r.Diverged, r.Divergences)
}
