package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/testkit"
)

// inprocNode is a real node (testkit.StartNode, embedded store) behind a real HTTP API, for
// CLI tests that call run() in process: faster than a `dair dev` child, same code paths.
type inprocNode struct {
	url  string
	node *actors.Node
}

func startInproc(t *testing.T) *inprocNode {
	t.Helper()
	n := testkit.StartNode(t, testkit.NodeOptions{Config: actors.Config{NodeID: "cli-test"}})
	srv := httptest.NewServer(api.New(api.Config{Node: n, SSEPoll: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return &inprocNode{url: srv.URL, node: n}
}

// cli runs one command line in process against the node (bounded by 60s).
func (n *inprocNode) cli(t *testing.T, args ...string) result {
	t.Helper()
	t.Setenv("DAIR_SERVER", "")
	t.Setenv("DAIR_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"--server", n.url}, args...), strings.NewReader(""), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// put stores a pipeline document through the CLI.
func (n *inprocNode) put(t *testing.T, src string) {
	t.Helper()
	f := t.TempDir() + "/p.yaml"
	require.NoError(t, writeFile(f, src))
	r := n.cli(t, "pipelines", "put", f)
	require.Equal(t, 0, r.code, r.stderr)
}
