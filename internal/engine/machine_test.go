package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/messages"
)

func mustIndex(t testing.TB, src string) *Index {
	t.Helper()
	p, err := dag.Load([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := dag.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := NewIndex(g)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestStepStatus_String(t *testing.T) {
	tests := []struct {
		s    StepStatus
		want string
	}{
		{StepPending, messages.StepPending},
		{StepRunning, messages.StepRunning},
		{StepSucceeded, messages.StepSucceeded},
		{StepFailed, messages.StepFailed},
		{StepSkipped, messages.StepSkipped},
		{StepCancelled, messages.StepCancelled},
		{StepStatus(99), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			if tt.want == "unknown" {
				return
			}
			back, ok := ParseStepStatus(tt.want)
			if !ok || back != tt.s {
				t.Fatalf("ParseStepStatus(%q) = %v, %v", tt.want, back, ok)
			}
		})
	}
	if s, ok := ParseStepStatus(""); !ok || s != StepPending {
		t.Fatalf(`ParseStepStatus("") = %v, %v; want pending, true`, s, ok)
	}
	if _, ok := ParseStepStatus("retrying"); ok {
		t.Fatal(`ParseStepStatus("retrying") is not a contract status`)
	}
}

func TestRunStatus_String(t *testing.T) {
	tests := []struct {
		s        RunStatus
		want     string
		terminal bool
	}{
		{RunRunning, messages.RunRunning, false},
		{RunPaused, messages.RunPaused, false},
		{RunSucceeded, messages.RunSucceeded, true},
		{RunFailed, messages.RunFailed, true},
		{RunCancelled, messages.RunCancelled, true},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			if tt.s.Terminal() != tt.terminal {
				t.Fatalf("Terminal() = %v", tt.s.Terminal())
			}
			if back, ok := ParseRunStatus(tt.want); !ok || back != tt.s {
				t.Fatalf("ParseRunStatus(%q) = %v, %v", tt.want, back, ok)
			}
		})
	}
	if s, ok := ParseRunStatus(messages.RunDispatched); ok || s != RunRunning {
		t.Fatalf("ParseRunStatus(dispatched) = %v, %v; want running, false", s, ok)
	}
}

func TestMachine_Step_malformedEvents(t *testing.T) {
	ix := mustIndex(t, "key: k\nsteps:\n  - {id: a, uses: echo}\n")
	now := time.Unix(0, 0)
	tests := []struct {
		name string
		ev   Event
		want error
	}{
		{"loaded without index", Loaded{}, ErrNoIndex},
		{"unknown step succeeded", AttemptSucceeded{Step: "nope", Attempt: 1}, ErrUnknownStep},
		{"unknown step failed", AttemptFailed{Step: "nope", Attempt: 1}, ErrUnknownStep},
		{"unknown step timed out", AttemptTimedOut{Step: "nope", Attempt: 1}, ErrUnknownStep},
		{"unknown step retry", RetryDue{Step: "nope", Attempt: 2}, ErrUnknownStep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{})
			if _, ok := tt.ev.(Loaded); !ok {
				if _, err := m.Step(now, Loaded{Index: ix}); err != nil {
					t.Fatal(err)
				}
			}
			effs, err := m.Step(now, tt.ev)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if len(effs) != 0 {
				t.Fatalf("effects = %v, want none", effs)
			}
		})
	}
}

func TestNewIndex_nilGraph(t *testing.T) {
	if _, err := NewIndex(nil); !errors.Is(err, ErrNoGraph) {
		t.Fatalf("err = %v, want ErrNoGraph", err)
	}
}

func TestIndex_backoff(t *testing.T) {
	ix := mustIndex(t, `key: k
steps:
  - {id: a, uses: echo}
  - {id: b, uses: echo, retry: {max_attempts: 9, backoff: 1s}}
  - {id: c, uses: echo, retry: {max_attempts: 9, backoff: 1s, max_backoff: 3s}}
`)
	tests := []struct {
		step    string
		attempt int
		want    time.Duration
	}{
		{"a", 1, 100 * time.Millisecond},
		{"a", 2, 200 * time.Millisecond},
		{"b", 1, time.Second},
		{"b", 3, 4 * time.Second},
		{"c", 2, 2 * time.Second},
		{"c", 3, 3 * time.Second},
		{"c", 40, 3 * time.Second},
		{"b", 40, 4096 * time.Second}, // doubling stops once past an hour
	}
	for _, tt := range tests {
		if got := ix.backoff(ix.pos[tt.step], tt.attempt); got != tt.want {
			t.Errorf("backoff(%s, %d) = %v, want %v", tt.step, tt.attempt, got, tt.want)
		}
	}
}

func TestTemplateRefs(t *testing.T) {
	tests := []struct {
		name      string
		with      map[string]any
		templated bool
		all       bool
		ids       []string
	}{
		{"none", nil, false, false, nil},
		{"plain text", map[string]any{"a": "x }} y", "n": 1.0}, false, false, nil},
		{"input only", map[string]any{"a": "{{ .input.x }}"}, true, false, nil},
		{"field", map[string]any{"a": "{{ .steps.fetch.output.body }}"}, true, false, []string{"fetch"}},
		{"dollar field", map[string]any{"a": []any{"{{ $.steps.b.output }}"}}, true, false, []string{"b"}},
		{"index", map[string]any{"a": `{{ index .steps "my-step" "output" }}`}, true, false, []string{"my-step"}},
		{"nested and repeated", map[string]any{"m": map[string]any{"x": "{{ if .steps.a.output }}{{ json .steps.a.output }}{{ end }}"}}, true, false, []string{"a"}},
		{"whole steps", map[string]any{"a": "{{ json .steps }}"}, true, true, nil},
		{"dot", map[string]any{"a": "{{ json . }}"}, true, true, nil},
		{"root variable", map[string]any{"a": "{{ $ }}"}, true, true, nil},
		{"declared variable", map[string]any{"a": "{{ $x := .steps.a.output }}{{ $x.b }}"}, true, true, []string{"a"}},
		{"dynamic index", map[string]any{"a": "{{ index .steps .input.which }}"}, true, true, nil},
		{"template call", map[string]any{"a": `{{ define "t" }}x{{ end }}{{ template "t" }}`}, true, true, nil},
		{"parse error", map[string]any{"a": "{{ .steps.a"}, true, true, nil},
		{"range over steps", map[string]any{"a": "{{ range .steps }}{{ . }}{{ end }}"}, true, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := templateRefs(tt.with)
			if got.templated != tt.templated || got.all != tt.all {
				t.Fatalf("templateRefs = %+v, want templated=%v all=%v", got, tt.templated, tt.all)
			}
			if !tt.all && !equalStrings(got.ids, tt.ids) {
				t.Fatalf("ids = %v, want %v", got.ids, tt.ids)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReadyQueue_popsInOrder(t *testing.T) {
	var q readyQueue
	for _, i := range []int32{5, 3, 9, 0, 7, 3, 1} {
		q.push(i)
	}
	var got []int32
	for len(q) > 0 {
		got = append(got, q.pop())
	}
	want := []int32{0, 1, 3, 3, 5, 7, 9}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pop order = %v, want %v", got, want)
		}
	}
}
