package demo

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// examples is the embedded copy of examples/pipelines.
//
//go:embed pipelines/*.yaml
var examples embed.FS

// examplePipelines returns the embedded example pipelines by file name, in name order.
func examplePipelines() ([]namedFile, error) {
	entries, err := fs.ReadDir(examples, "pipelines")
	if err != nil {
		return nil, fmt.Errorf("demo: read embedded pipelines: %w", err)
	}
	out := make([]namedFile, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := examples.ReadFile("pipelines/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("demo: read embedded %s: %w", e.Name(), err)
		}
		out = append(out, namedFile{name: e.Name(), data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// namedFile is one embedded file.
type namedFile struct {
	name string
	data []byte
}

// chainPipeline returns a demo-only variant of long-sleep: n sleep steps of d in a chain.
func chainPipeline(key string, n int, d string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "key: %s\ndescription: %d sleeps of %s in a chain (demo restart scenario)\nsteps:\n", key, n, d)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: s%02d\n    uses: sleep\n", i)
		if i > 1 {
			fmt.Fprintf(&b, "    needs: [s%02d]\n", i-1)
		}
		fmt.Fprintf(&b, "    with: {duration: %s}\n", d)
	}
	return []byte(b.String())
}
