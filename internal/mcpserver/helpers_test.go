package mcpserver_test

import (
	"net/http/httptest"
	"testing"

	"github.com/dairuntime/dair/internal/mcpserver"
	"github.com/dairuntime/dair/internal/mcpserver/mcptest"
)

const echoPipeline = `key: greet
steps:
  - id: hello
    uses: echo
    with: {value: "hello {{ .input.name }}"}
  - id: shout
    uses: echo
    needs: [hello]
    with: {value: "{{ .steps.hello.output }}!"}
  - id: bye
    uses: echo
    needs: [hello]
    with: {value: "bye"}
`

var testSecret = []byte("mcp-test-secret-0123456789")

// startNode starts a node behind a real HTTP API with HS256 auth on testSecret and stores the
// echo pipeline.
func startNode(t *testing.T) *mcptest.API {
	t.Helper()
	n := mcptest.StartAPI(t, "mcp-test", testSecret)
	n.PutPipeline(t, "greet", echoPipeline)
	return n
}

// serveMCP serves HTTPHandler(cfg) on a loopback test server and returns its URL.
func serveMCP(t *testing.T, cfg mcpserver.Config) string {
	t.Helper()
	srv := httptest.NewServer(mcpserver.HTTPHandler(cfg))
	t.Cleanup(srv.Close)
	return srv.URL
}
