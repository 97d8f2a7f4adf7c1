package main

import (
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/standin"
)

// TestDair_Handlers_readmeExample runs the README's example pipeline (the same pipeline as
// examples/summarize-report.yaml) against the stand-in that docs/handlers.md starts, with
// DAIR_LLM_BASE_URL pointing llm.chat at it.
func TestDair_Handlers_readmeExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)## Pipelines\n\n```yaml\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "README has a yaml block under ## Pipelines")
	file, err := os.ReadFile("../../examples/summarize-report.yaml")
	require.NoError(t, err)
	fromReadme, err := dag.Parse(block[1])
	require.NoError(t, err)
	fromFile, err := dag.Parse(file)
	require.NoError(t, err)
	require.Equal(t, fromFile.Hash, fromReadme.Hash, "README's pipeline is examples/summarize-report.yaml")
	doc, err := os.ReadFile("../../docs/handlers.md")
	require.NoError(t, err)
	for _, want := range []string{"dair standin", "DAIR_LLM_BASE_URL=http://127.0.0.1:9000/v1", "examples/summarize-report.yaml"} {
		require.Contains(t, string(doc), want)
	}

	srv := httptest.NewServer(standin.Handler())
	t.Cleanup(srv.Close)
	t.Setenv("DAIR_LLM_BASE_URL", srv.URL+"/v1")
	n := startInproc(t)
	n.put(t, strings.ReplaceAll(string(file), "http://127.0.0.1:9000", srv.URL))
	r := n.cli(t, "submit", "summarize-report", "--tenant", "acme", "--wait", "-o", "json")
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, `[stand-in m] Summarize: dair runs AI pipelines durably`)
	run, err := client.New(n.url, "").QueryRuns(t.Context(), client.RunQuery{Pipeline: "summarize-report", Limit: 1})
	require.NoError(t, err)
	require.Len(t, run.Runs, 1)
}
