package dag

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/messages"
)

// diamond: a -> (c, b) -> d, plus an independent z and e needing a.
const diamondYAML = `
key: diamond
steps:
  - {id: d, uses: echo, needs: [c, b]}
  - {id: z, uses: echo}
  - {id: c, uses: echo, needs: [a], retry: {max_attempts: 3}}
  - {id: b, uses: echo, needs: [a, a]}
  - {id: a, uses: echo}
  - {id: e, uses: echo, needs: [a]}
`

func mustGraph(t *testing.T, doc string) *Graph {
	t.Helper()
	p, err := Load([]byte(doc), nil)
	require.NoError(t, err)
	g, err := Compile(p)
	require.NoError(t, err)
	return g
}

func TestGraph_Order_levelThenID(t *testing.T) {
	g := mustGraph(t, diamondYAML)
	require.Equal(t, []string{"a", "z", "b", "c", "e", "d"}, g.Order())
	require.Equal(t, 0, g.Level("a"))
	require.Equal(t, 1, g.Level("b"))
	require.Equal(t, 2, g.Level("d"))
	require.Equal(t, -1, g.Level("nope"))
	require.Equal(t, []string{"a"}, g.Needs("b"))
	require.Equal(t, []string{"b", "c", "e"}, g.Dependents("a"))
	require.Equal(t, 6, g.Len())
	require.Equal(t, "diamond", g.Pipeline().Key)
}

func TestCompile_errors(t *testing.T) {
	tests := []struct {
		name string
		p    *Pipeline
		kind ErrorKind
	}{
		{"nil", nil, KindNoSteps},
		{"empty id", &Pipeline{Steps: []Step{{}}}, KindEmptyID},
		{"duplicate", &Pipeline{Steps: []Step{{ID: "a"}, {ID: "a"}}}, KindDuplicateID},
		{"unknown dep", &Pipeline{Steps: []Step{{ID: "a", Needs: []string{"b"}}}}, KindUnknownDependency},
		{"cycle", &Pipeline{Steps: []Step{{ID: "a", Needs: []string{"b"}}, {ID: "b", Needs: []string{"a"}}}}, KindCycle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.p)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.kind, ve.Kind)
		})
	}
}

func TestGraph_Ready(t *testing.T) {
	g := mustGraph(t, diamondYAML)
	tests := []struct {
		name   string
		status map[string]string
		want   []string
		block  []string
	}{
		{"fresh", nil, []string{"a", "z"}, nil},
		{"explicit pending", map[string]string{"a": messages.StepPending}, []string{"a", "z"}, nil},
		{"a running", map[string]string{"a": messages.StepRunning}, []string{"z"}, nil},
		{"a done", map[string]string{"a": messages.StepSucceeded, "z": messages.StepSucceeded}, []string{"b", "c", "e"}, nil},
		{"half of d's needs", map[string]string{"a": messages.StepSucceeded, "b": messages.StepSucceeded, "c": messages.StepRunning}, []string{"z", "e"}, nil},
		{"d ready", map[string]string{"a": messages.StepSucceeded, "b": messages.StepSucceeded, "c": messages.StepSucceeded}, []string{"z", "e", "d"}, nil},
		{"failed need blocks", map[string]string{"a": messages.StepSucceeded, "b": messages.StepFailed, "c": messages.StepSucceeded}, []string{"z", "e"}, []string{"d"}},
		{"skipped need blocks", map[string]string{"a": messages.StepSkipped}, []string{"z"}, []string{"b", "c", "e"}},
		{"unknown ids ignored", map[string]string{"ghost": messages.StepPending}, []string{"a", "z"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 { // deterministic across calls
				require.Equal(t, tt.want, g.Ready(tt.status))
			}
			require.Equal(t, tt.block, g.Blocked(tt.status))
		})
	}
}

func st(status string, attempts int32) *messages.StepState {
	return &messages.StepState{Status: status, Attempts: attempts}
}

func TestGraph_Resume(t *testing.T) {
	g := mustGraph(t, diamondYAML)
	all := func(s string) map[string]*messages.StepState {
		m := map[string]*messages.StepState{}
		for _, id := range g.Order() {
			m[id] = st(s, 1)
		}
		return m
	}
	withSkipped := all(messages.StepSucceeded)
	withSkipped["d"] = st(messages.StepSkipped, 0)
	tests := []struct {
		name        string
		states      map[string]*messages.StepState
		maxAttempts func(string) int
		want        ResumePlan
	}{
		{
			name: "fresh",
			want: ResumePlan{Ready: []string{"a", "z"}},
		},
		{
			name:   "partial",
			states: map[string]*messages.StepState{"a": st(messages.StepSucceeded, 1), "z": st(messages.StepPending, 0)},
			want:   ResumePlan{Succeeded: []string{"a"}, Ready: []string{"z", "b", "c", "e"}},
		},
		{
			name: "running at crash is rerun",
			states: map[string]*messages.StepState{
				"a": st(messages.StepSucceeded, 1), "z": st(messages.StepSucceeded, 1),
				"b": st(messages.StepRunning, 1), "c": st(messages.StepSucceeded, 2),
			},
			want: ResumePlan{Succeeded: []string{"a", "z", "c"}, Ready: []string{"b", "e"}},
		},
		{
			name: "failed with attempts left is rerun",
			states: map[string]*messages.StepState{
				"a": st(messages.StepSucceeded, 1), "c": st(messages.StepFailed, 2),
			},
			want: ResumePlan{Succeeded: []string{"a"}, Ready: []string{"z", "b", "c", "e"}},
		},
		{
			name: "cancelled is rerun",
			states: map[string]*messages.StepState{
				"a": st(messages.StepCancelled, 1),
			},
			want: ResumePlan{Ready: []string{"a", "z"}},
		},
		{
			name: "failed terminal",
			states: map[string]*messages.StepState{
				"a": st(messages.StepSucceeded, 1), "c": st(messages.StepFailed, 3), "b": st(messages.StepFailed, 1),
			},
			want: ResumePlan{Succeeded: []string{"a"}, Failed: true, FailedStep: "b", Skip: []string{"z", "e", "d"}},
		},
		{
			name: "failed terminal leaves interrupted records and skips the rest",
			states: map[string]*messages.StepState{
				"a": st(messages.StepSucceeded, 1), "b": st(messages.StepFailed, 1), "c": st(messages.StepRunning, 1),
				"e": st(messages.StepPending, 1),
			},
			want: ResumePlan{Succeeded: []string{"a"}, Failed: true, FailedStep: "b",
				Skip: []string{"z", "e", "d"}},
		},
		{
			name: "pending with attempts made was waiting for a retry",
			states: map[string]*messages.StepState{
				"a": st(messages.StepSucceeded, 1), "c": st(messages.StepPending, 1),
			},
			want: ResumePlan{Succeeded: []string{"a"}, Ready: []string{"z", "b", "c", "e"}},
		},
		{
			name: "maxAttempts callback overrides policy",
			states: map[string]*messages.StepState{
				"a": st(messages.StepFailed, 1),
			},
			maxAttempts: func(string) int { return 5 },
			want:        ResumePlan{Ready: []string{"a", "z"}},
		},
		{
			name:   "all done",
			states: all(messages.StepSucceeded),
			want:   ResumePlan{Succeeded: []string{"a", "z", "b", "c", "e", "d"}, Done: true},
		},
		{
			name:   "skipped counts as done",
			states: withSkipped,
			want:   ResumePlan{Succeeded: []string{"a", "z", "b", "c", "e"}, Skipped: []string{"d"}, Done: true},
		},
		{
			name: "skipped need skips its dependents, transitively",
			states: map[string]*messages.StepState{
				"a": st(messages.StepSkipped, 0), "z": st(messages.StepSucceeded, 1),
			},
			want: ResumePlan{Succeeded: []string{"z"}, Skipped: []string{"a"}, Skip: []string{"b", "c", "e", "d"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, g.Resume(tt.states, tt.maxAttempts))
		})
	}
}

func TestGraph_Width(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"chain", "key: c\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo, needs: [a]}\n", 1},
		{"fan-out of three", "key: f\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo, needs: [a]}\n  - {id: c, uses: echo, needs: [a]}\n  - {id: d, uses: echo, needs: [a]}\n", 3},
		{"independent", "key: i\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo}\n", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load([]byte(tc.src), nil)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Compile(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Width(); got != tc.want {
				t.Fatalf("Width() = %d, want %d", got, tc.want)
			}
		})
	}
}
