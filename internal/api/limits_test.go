package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/dag"
)

// chainDoc returns a pipeline of n chained echo steps.
func chainDoc(key string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key: %s\nsteps:\n", key)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, uses: echo", i)
		if i > 0 {
			fmt.Fprintf(&b, ", needs: [s%d], with: {value: '{{ .steps.s%d.output }}'}", i-1, i-1)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func TestServer_putPipeline_limits(t *testing.T) {
	f := newFixture(t, false, nil)
	f.call("PUT", "/v1/pipelines/max", chainDoc("max", dag.DefaultMaxSteps), http.StatusOK, nil)
	eb := f.callErr("PUT", "/v1/pipelines/over", chainDoc("over", dag.DefaultMaxSteps+1), http.StatusBadRequest, httpapi.CodeInvalidPipeline)
	require.Equal(t, "dag: too_many_steps: the pipeline has 1001 steps; the limit is 1000", eb.Error.Message)

	big := "key: big\ndescription: '" + strings.Repeat("x", dag.DefaultMaxDocumentBytes) + "'\nsteps:\n  - {id: a, uses: echo}\n"
	eb = f.callErr("PUT", "/v1/pipelines/big", big, http.StatusBadRequest, httpapi.CodeInvalidPipeline)
	require.Contains(t, eb.Error.Message, "document_too_large")

	tpl := "key: tpl\nsteps:\n  - {id: a, uses: echo, with: {value: '{{ .input }}" + strings.Repeat("x", dag.DefaultMaxTemplateBytes) + "'}}\n"
	eb = f.callErr("PUT", "/v1/pipelines/tpl", tpl, http.StatusBadRequest, httpapi.CodeInvalidPipeline)
	require.Contains(t, eb.Error.Message, `step "a": template_too_large: with.value`)

	raised := newFixture(t, false, func(c *api.Config) { c.Limits.MaxSteps = 2000 })
	raised.call("PUT", "/v1/pipelines/over", chainDoc("over", dag.DefaultMaxSteps+1), http.StatusOK, nil)
}

func TestServer_metricsAuth(t *testing.T) {
	open := newFixture(t, true, nil)
	open.call("GET", "/metrics", "", http.StatusOK, nil)

	f := newFixture(t, true, func(c *api.Config) { c.MetricsAuth = true })
	f.callErr("GET", "/metrics", "", http.StatusUnauthorized, httpapi.CodeUnauthenticated)
	f.as(mintToken(t, "acme", "tenant")).callErr("GET", "/metrics", "", http.StatusForbidden, httpapi.CodeForbidden)
	b := f.as(mintToken(t, "ops", "operator")).call("GET", "/metrics", "", http.StatusOK, nil)
	require.Contains(t, string(b), "dair_")
	f.call("GET", "/healthz", "", http.StatusOK, nil)
}
