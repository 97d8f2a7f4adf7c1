package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDair_Demo_exitsZero(t *testing.T) {
	r := dair(t, "demo", "--data", t.TempDir())
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	for _, want := range []string{"tenant-a-runtime-1", "tenant-b-runtime-1", "runtime-instance-1",
		"diverged    false", "all 6 runs succeeded"} {
		require.Contains(t, r.stdout, want)
	}
	require.NotContains(t, r.stdout, "\033", "no terminal escapes when stdout is not a TTY")
	require.Empty(t, strings.TrimSpace(r.stderr))
}

func TestDair_Demo_json(t *testing.T) {
	r := dair(t, "demo", "--data", t.TempDir(), "-o", "json")
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	var res struct {
		OK   bool `json:"ok"`
		Runs []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout is one JSON document:\n%s", r.stdout)
	require.True(t, res.OK)
	require.Len(t, res.Runs, 6)
	require.Contains(t, r.stderr, "all 6 runs succeeded", "the narrated report goes to stderr")
}
