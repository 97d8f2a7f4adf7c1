package dag

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chainYAML returns a pipeline of n echo steps s0 → s1 → ... where each step needs the previous
// one and templates its output, the shape of the 5,000- and 17,000-step chains.
func chainYAML(n int) []byte {
	var b strings.Builder
	b.WriteString("key: chain\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: s%d\n    uses: echo\n", i)
		if i == 0 {
			b.WriteString("    with: {value: \"{{ .input }}\"}\n")
			continue
		}
		fmt.Fprintf(&b, "    needs: [s%d]\n    with: {value: \"{{ .steps.s%d.output }}\"}\n", i-1, i-1)
	}
	return []byte(b.String())
}

// widestYAML returns a pipeline at the limits l, shaped to cost validation the most: MaxSteps
// steps, each needing up to fanIn earlier steps and templating every one of them plus s0 (an
// indirect need, which costs an ancestor walk).
func widestYAML(l Limits, fanIn int) []byte {
	var b strings.Builder
	b.WriteString("key: widest\nsteps:\n")
	for i := 0; i < l.MaxSteps; i++ {
		fmt.Fprintf(&b, "  - id: s%d\n    uses: echo\n", i)
		fanIn := min(i, fanIn)
		if fanIn == 0 {
			b.WriteString("    with: {value: \"{{ .input }}\"}\n")
			continue
		}
		needs := make([]string, 0, fanIn)
		var tpl strings.Builder
		tpl.WriteString("{{ .steps.s0.output }}")
		for j := i - fanIn; j < i; j++ {
			needs = append(needs, fmt.Sprintf("s%d", j))
			fmt.Fprintf(&tpl, "{{ .steps.s%d.output }}", j)
		}
		fmt.Fprintf(&b, "    needs: [%s]\n    with: {value: \"%s\"}\n", strings.Join(needs, ", "), tpl.String())
	}
	return []byte(b.String())
}

// BenchmarkLoadChain measures Load (parse, validate, hash) plus Compile of n-step chains with
// the step limit lifted: validation must stay linear in the pipeline's size.
func BenchmarkLoadChain(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		doc := chainYAML(n)
		lim := DefaultLimits()
		lim.MaxSteps, lim.MaxDocumentBytes = n, 2*len(doc)
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			benchLoad(b, doc, lim)
		})
	}
}

// BenchmarkLoadLargestAllowed measures Load plus Compile of the costliest pipeline the default
// limits accept.
func BenchmarkLoadLargestAllowed(b *testing.B) {
	lim := DefaultLimits()
	doc := widestYAML(lim, 14)
	if len(doc) > lim.MaxDocumentBytes {
		b.Fatalf("widest pipeline is %d bytes, over the %d limit", len(doc), lim.MaxDocumentBytes)
	}
	benchLoad(b, doc, lim)
}

// benchLoad reports, besides ns/op, cpu-ns/op: the process's CPU time per operation, which
// a machine shared with other work inflates less than the wall time.
func benchLoad(b *testing.B, doc []byte, lim Limits) {
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	cpu0 := cpuTime(b)
	for b.Loop() {
		if err := lim.CheckDocument(doc); err != nil {
			b.Fatal(err)
		}
		p, err := Load(doc, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := lim.Check(p); err != nil {
			b.Fatal(err)
		}
		if _, err := Compile(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
