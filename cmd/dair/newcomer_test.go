package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/server"
	"github.com/dairuntime/dair/testkit"
)

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// diamond's steps sort by id as a, b, join, root; by graph level they are root, a, b, join.
const diamondYAML = testkit.DiamondPipeline

func TestDair_Errors_hints(t *testing.T) {
	n := startInproc(t)
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"unknown pipeline", []string{"submit", "nosuch", "--tenant", "a"}, 1,
			[]string{`pipeline "nosuch" not found`, `run "dair pipelines list"`}},
		{"unknown run", []string{"runs", "get", "nosuch"}, 1, []string{`run "nosuch" not found`, `run "dair runs list"`}},
		{"tenant never put", []string{"tenants", "get", "nosuch"}, 1, []string{`tenant "nosuch" not found`, `"dair tenants list"`}},
		{"pipeline without key", []string{"pipelines", "get", "nosuch"}, 1, []string{`run "dair pipelines list"`}},
		{"not a cluster", []string{"cluster", "members"}, 1, []string{"not a cluster member"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := n.cli(t, tc.args...)
			require.Equal(t, tc.wantCode, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one error line: %q", r.stderr)
			for _, w := range tc.wantErr {
				require.Contains(t, r.stderr, w)
			}
			require.NotContains(t, r.stderr, "actors:")
			require.NotContains(t, r.stderr, "store:")
		})
	}
}

func TestDair_Runs_getGraphOrderYAMLAndLimit(t *testing.T) {
	n := startInproc(t)
	n.put(t, diamondYAML)
	n.put(t, testkit.ThreeStepPipeline)
	var id string
	for i := 0; i < 3; i++ {
		r := n.cli(t, "submit", "diamond", "--tenant", "acme", "--wait")
		require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		id = strings.Fields(r.stdout)[1] // "run ID submitted"
	}
	r := n.cli(t, "runs", "get", id)
	require.Equal(t, 0, r.code, r.stderr)
	table := r.stdout[strings.Index(r.stdout, "STEP"):]
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		order = append(order, strings.Fields(line)[0])
	}
	require.Equal(t, []string{"root", "a", "b", "join"}, order, "steps in graph order:\n%s", table)
	require.NotRegexp(t, `succeeded\s+1\s+0s`, table, "an echo step takes microseconds, not 0s")

	r = n.cli(t, "runs", "get", id, "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "shared_run_id: "+id)
	require.Contains(t, r.stdout, "needs:\n      - a\n      - b")

	r = n.cli(t, "runs", "list", "--limit", "2", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, `"shared_run_id"`), r.stdout)
	r = n.cli(t, "runs", "list", "--pipeline", "three")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stdout), "\n")+1, "header only:\n%s", r.stdout)
}

func TestDair_Check_pipelinesCheck(t *testing.T) {
	n := startInproc(t)
	n.put(t, diamondYAML)
	for i := 0; i < 2; i++ {
		r := n.cli(t, "submit", "diamond", "--tenant", "acme", "--wait")
		require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	dir := t.TempDir()
	same := dir + "/same.yaml"
	require.NoError(t, writeFile(same, diamondYAML+"    retry: {max_attempts: 2}\n"))
	r := n.cli(t, "pipelines", "check", same)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "2 recent execution(s) checked, none would diverge")

	changed := dir + "/changed.yaml"
	require.NoError(t, writeFile(changed, strings.Replace(diamondYAML, "{value: j}", "{value: J}", 1)))
	r = n.cli(t, "pipelines", "check", changed, "--last", "1")
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "with-changed")
	require.Contains(t, r.stdout, "1 of 1 recent execution(s) would diverge")

	r = n.cli(t, "pipelines", "check", changed, "-o", "json")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, `"checked": 2`)
	require.Contains(t, r.stdout, `"step_id": "join"`)

	nokey := dir + "/nokey.yaml"
	require.NoError(t, writeFile(nokey, "steps:\n  - id: a\n    uses: echo\n"))
	for _, sub := range []string{"check", "put"} {
		r = n.cli(t, "pipelines", sub, nokey)
		require.Equal(t, 2, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		require.Contains(t, r.stderr, "missing_key")
		require.NotContains(t, r.stderr, "no route")
	}
}

func TestDair_Submit_inputSchema(t *testing.T) {
	n := startInproc(t)
	dir := t.TempDir()
	plain := dir + "/three.yaml"
	require.NoError(t, writeFile(plain, testkit.ThreeStepPipeline))
	r := n.cli(t, "pipelines", "put", plain)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "dair: warning: step \"a\" uses .input.name")

	n.put(t, "key: greet\ninput_schema: {type: object, required: [name], properties: {name: {type: string}}}\n"+
		"steps:\n  - id: hello\n    uses: echo\n    with: {value: \"hello {{ .input.name }}\"}\n")
	r = n.cli(t, "submit", "greet", "--tenant", "acme", "--input", `{"name":1}`)
	require.Equal(t, 2, r.code, "bad input is exit 2: stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, `at "/name"`)
	r = n.cli(t, "submit", "greet", "--tenant", "acme", "--input", `{"name":"ada"}`, "--wait")
	require.Equal(t, 0, r.code, r.stderr)
	r = n.cli(t, "pipelines", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `greet\s+\S+\s+1\s+true`, r.stdout)
}

func TestApp_printInstances_nodeColumn(t *testing.T) {
	var out strings.Builder
	a := &app{stdout: &out}
	require.NoError(t, a.printInstances([]httpapi.Instance{{RuntimeInstanceID: "ri-1", HostID: "h", Status: "ready"}}, false))
	require.NotContains(t, out.String(), "NODE", "a single node has no NODE column")
	out.Reset()
	require.NoError(t, a.printInstances([]httpapi.Instance{{RuntimeInstanceID: "ri-1", HostID: "n1", Status: "ready"},
		{RuntimeInstanceID: "ri-2", HostID: "n2", Status: "ready"}}, true))
	require.Regexp(t, `(?m)^ID\s+NODE\s+STATUS`, out.String())
	require.Regexp(t, `(?m)^ri-2\s+n2\s+ready`, out.String())
}

func TestDair_Completion_pipelinesAndRuns(t *testing.T) {
	n := startInproc(t)
	n.put(t, diamondYAML)
	r := n.cli(t, "submit", "diamond", "--tenant", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	r = n.cli(t, "__complete", "submit", "")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "diamond")
	r = n.cli(t, "__complete", "runs", "watch", "")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, id+"\tdiamond")
	r = n.cli(t, "completion", "bash")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "bash completion")
}

func TestDair_Trace_tree(t *testing.T) {
	n := startInproc(t)
	n.put(t, diamondYAML)
	r := n.cli(t, "submit", "diamond", "--tenant", "acme", "--wait", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.Fields(strings.SplitN(r.stdout, `"shared_run_id": "`, 2)[1])[0]
	id = strings.TrimSuffix(id, `",`)
	r = n.cli(t, "executions", "trace", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^run \S+ run_succeeded`, r.stdout)
	require.Regexp(t, `(?m)^├── \+\S+\s+step root `, r.stdout)
	require.Regexp(t, `(?m)^│   └── \+\S+\s+attempt 1 succeeded`, r.stdout)
	r = n.cli(t, "executions", "trace", id, "--flat")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "NAME")
}

// A serving command whose store cannot be opened says so, names no internal package, and does
// not suggest starting a node as if --server were the problem.
func TestDair_Serve_storeErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	held, err := server.OpenStore(context.Background(), "bolt://"+filepath.Join(dir, "dair.db"))
	require.NoError(t, err)
	defer held.Close()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"redis down", []string{"node", "--store", "redis://" + closed + "/0", "--node-id", "n1",
			"--http", "127.0.0.1:0"}, "connection refused (is Redis running"},
		{"data dir in use", []string{"dev", "--data", dir, "--http", "127.0.0.1:0"}, "another process holds the file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			require.Equal(t, exitFailed, code, errb.String())
			require.Contains(t, errb.String(), tc.want)
			require.NotContains(t, errb.String(), "is a node running")
			require.NotContains(t, errb.String(), "boltstore")
			require.NotContains(t, errb.String(), "redisstore")
		})
	}
}

// dev's help does not offer --host-mode process, which dev refuses; node's help does.
func TestDair_Help_hostModeProcessOnlyOnNode(t *testing.T) {
	help := func(cmd string) string {
		var out, errb strings.Builder
		require.Equal(t, 0, run(context.Background(), []string{cmd, "--help"}, strings.NewReader(""), &out, &errb), errb.String())
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "--host-mode") {
				return line
			}
		}
		t.Fatalf("%s --help has no --host-mode line:\n%s", cmd, out.String())
		return ""
	}
	require.NotContains(t, help("dev"), "process (")
	require.Contains(t, help("dev"), "fixture (in this process) or attach")
	require.Contains(t, help("node"), "process (child")
	require.NotContains(t, help("node"), "not with dev")
}

// CLI errors do not start with the name of an internal package.
func TestDair_Errors_noPackagePrefix(t *testing.T) {
	cases := [][]string{
		{"dev", "--data", t.TempDir(), "--http", "0.0.0.0:0"},
		{"mcp", "--http", "0.0.0.0:0"},
		{"token", "--tenant", "a", "--roles", "bogus", "--secret-file", "/dev/null"},
	}
	for _, args := range cases {
		var out, errb strings.Builder
		code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		require.Equal(t, exitUsage, code, errb.String())
		require.True(t, strings.HasPrefix(errb.String(), "dair: "), errb.String())
		for _, p := range internalPrefixes {
			require.False(t, strings.HasPrefix(strings.TrimPrefix(errb.String(), "dair: "), p), errb.String())
		}
	}
}
