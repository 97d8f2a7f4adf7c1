package dag

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimits_Check(t *testing.T) {
	big := "{{ .input }}" + strings.Repeat("x", 100)
	tests := []struct {
		name string
		lim  Limits
		doc  string
		kind ErrorKind // "" => within the limits
		msg  string
	}{
		{"within", Limits{MaxSteps: 2}, "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo}\n", "", ""},
		{"too many steps", Limits{MaxSteps: 1}, "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo}\n",
			KindTooManySteps, "dag: too_many_steps: the pipeline has 2 steps; the limit is 1"},
		{"template too large", Limits{MaxTemplateBytes: 64}, "key: k\nsteps:\n  - {id: a, uses: echo, with: {v: [ok, '" + big + "']}}\n",
			KindTemplateTooLarge, `dag: step "a": template_too_large: with.v[1]: the template is 112 bytes; the limit is 64`},
		{"large plain text is not a template", Limits{MaxTemplateBytes: 64}, "key: k\nsteps:\n  - {id: a, uses: echo, with: {v: '" + strings.Repeat("x", 100) + "'}}\n", "", ""},
		{"zero limits are the defaults", Limits{}, "key: k\nsteps:\n  - {id: a, uses: echo}\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.doc))
			require.NoError(t, err)
			err = tt.lim.Check(p)
			if tt.kind == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.kind, ve.Kind)
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, tt.msg, err.Error())
		})
	}
}

func TestLimits_CheckDocument(t *testing.T) {
	require.NoError(t, Limits{MaxDocumentBytes: 10}.CheckDocument(make([]byte, 10)))
	err := Limits{MaxDocumentBytes: 10}.CheckDocument(make([]byte, 11))
	require.ErrorIs(t, err, ErrInvalid)
	require.EqualError(t, err, "dag: document_too_large: the document is 11 bytes; the limit is 10")
	require.NoError(t, Limits{}.CheckDocument(make([]byte, DefaultMaxDocumentBytes)))
	require.Error(t, Limits{}.CheckDocument(make([]byte, DefaultMaxDocumentBytes+1)))
}

// TestLoad_linearInSize loads chains of n and 4n steps and compares the bytes allocated:
// linear validation allocates about 4 times more for the longer chain; per-step ancestor sets
// allocated about 16 times more (and 700 MB for 5,000 steps).
func TestLoad_linearInSize(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of megabytes")
	}
	alloc := func(n int) uint64 {
		doc := chainYAML(n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, err := Load(doc, nil)
		require.NoError(t, err)
		_, err = Compile(p)
		require.NoError(t, err)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(1000), alloc(4000)
	ratio := float64(large) / float64(small)
	t.Logf("1,000 steps: %d bytes; 4,000 steps: %d bytes (x%.1f)", small, large, ratio)
	require.Less(t, ratio, 6.0, "validation allocates more than linearly in the pipeline's size")
}

// TestPipeline_Step_constantTime looks every step of a 20,000-step pipeline up by id; with a
// linear search that is 200 million comparisons (seconds), with the index a millisecond.
func TestPipeline_Step_constantTime(t *testing.T) {
	const n = 20000
	p := &Pipeline{Key: "k", Steps: make([]Step, n)}
	for i := range p.Steps {
		p.Steps[i] = Step{ID: fmt.Sprintf("s%d", i), Uses: "echo"}
	}
	took := threadCPU(t, func() {
		for i := n - 1; i >= 0; i-- {
			s, ok := p.Step(fmt.Sprintf("s%d", i))
			if !ok || s != &p.Steps[i] {
				t.Fatalf("Step(s%d) = %v, %v", i, s, ok)
			}
		}
	})
	t.Logf("%d lookups: %v CPU", n, took)
	require.Less(t, took, 500*time.Millisecond)
}

func TestPipeline_Step_changedPipeline(t *testing.T) {
	p := &Pipeline{Key: "k", Steps: []Step{{ID: "a"}, {ID: "b"}}}
	_, ok := p.Step("a")
	require.True(t, ok)
	p.Steps[0].ID = "c" // modified after the index was built: found by the linear fallback
	s, ok := p.Step("c")
	require.True(t, ok)
	require.Same(t, &p.Steps[0], s)
	_, ok = p.Step("a")
	require.False(t, ok)
	p.Steps = append(p.Steps, Step{ID: "d"})
	s, ok = p.Step("d")
	require.True(t, ok)
	require.Same(t, &p.Steps[2], s)
	var nilP *Pipeline
	_, ok = nilP.Step("a")
	require.False(t, ok)
}

// threadCPU returns the CPU time f used on its (locked) OS thread: unlike the wall time it
// does not grow when other processes load the machine.
func threadCPU(t *testing.T, f func()) time.Duration {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	read := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
			t.Fatalf("getrusage: %v", err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := read()
	f()
	return read() - start
}

func TestValidate_indirectTemplateReferences(t *testing.T) {
	// a <- b <- c, d independent; c may reference a (indirect), not d.
	doc := func(ref string) string {
		return "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: d, uses: echo}\n  - {id: b, uses: echo, needs: [a]}\n" +
			"  - {id: c, uses: echo, needs: [b], with: {x: '{{ .steps.b.output }}', v: '{{ .steps." + ref + ".output }}'}}\n"
	}
	_, err := Load([]byte(doc("a")), nil)
	require.NoError(t, err)
	_, err = Load([]byte(doc("d")), nil)
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	require.Equal(t, KindBadTemplate, ve.Kind)
	require.Contains(t, err.Error(), `step "d", which is not in the step's needs`)
}
