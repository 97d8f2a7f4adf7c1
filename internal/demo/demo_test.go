package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/step"
)

func TestRun_Run_scenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		out bytes.Buffer
		res Result
	)
	err := Run(ctx, Options{Out: &out, DataDir: t.TempDir(), Result: &res})
	text := out.String()
	require.NoError(t, err, "report:\n%s", text)
	t.Log("\n" + text)
	require.True(t, res.OK, "Result.OK of a successful scenario")
	require.Len(t, res.Runs, 6, "Result lists every run")
	for _, r := range res.Runs {
		require.Equal(t, "succeeded", r.Status, "%+v", r)
		require.Equal(t, r.Steps, r.StepsSucceeded, "%+v", r)
	}

	for _, want := range []string{"tenant-a-runtime-1", "tenant-b-runtime-1", "runtime-instance-1",
		"stand-in OpenAI-compatible server", "diverged    false", "all 6 runs succeeded",
		"every interrupted run resumed from its committed steps with the same execution id"} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "\033", "no terminal escapes into a buffer")

	// Every chain resumed under the execution id it started with: the ledger shows a
	// "started" and a "resumed" line for the same id.
	started := regexp.MustCompile(`restart-chain .* execution (\S+) started on`).FindAllStringSubmatch(text, -1)
	require.Len(t, started, 2, text)
	for _, m := range started {
		require.Contains(t, text, "recovery: execution "+m[1]+" resumed on")
	}
	require.Regexp(t, `step fetch\s+attempt 1 failed, retry in`, text)
}

func TestRun_Run_tempDirRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole scenario")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, Run(ctx, Options{Out: &out}), out.String())
	require.Contains(t, out.String(), filepath.Join(tmp, "dair-demo-"), "the data dir is a temporary dir")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the temporary data dir is removed")
}

func TestRun_Run_cancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := Run(ctx, Options{Out: &out, DataDir: t.TempDir()})
	require.Error(t, err)
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
}

func TestExamples_embeddedCopy_inSync(t *testing.T) {
	files, err := examplePipelines()
	require.NoError(t, err)
	src, err := filepath.Glob(filepath.Join("..", "..", "examples", "pipelines", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, len(src), "internal/demo/pipelines must hold exactly the files of examples/pipelines")
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join("..", "..", "examples", "pipelines", f.name))
		require.NoError(t, err, "embedded %s has no source in examples/pipelines", f.name)
		require.True(t, bytes.Equal(want, f.data), "internal/demo/pipelines/%s differs from examples/pipelines/%s: copy it over", f.name, f.name)
	}
}

func TestExamples_Load_valid(t *testing.T) {
	reg := step.NewRegistry()
	require.NoError(t, handlers.Register(reg, handlers.Options{}))
	files, err := examplePipelines()
	require.NoError(t, err)
	files = append(files, namedFile{name: chainKey, data: chainPipeline(chainKey, chainSteps, chainStepTime)})
	wantSteps := map[string]int{"hello.yaml": 3, "http-retry.yaml": 2, "long-sleep.yaml": 20, "research-fanout.yaml": 7, chainKey: chainSteps}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			p, err := dag.Load(f.data, reg.Has)
			require.NoError(t, err)
			require.Equal(t, strings.TrimSuffix(f.name, ".yaml"), p.Key, "file name and key agree")
			require.Len(t, p.Steps, wantSteps[f.name])
		})
	}
}
