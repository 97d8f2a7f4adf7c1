package dag

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const hashJSON = `{
  "description": "fetch then summarize",
  "key": "summarize-report",
  "steps": [
    {"id": "summarize", "uses": "llm.chat", "needs": ["fetch"],
     "with": {"prompt": "Summarize: {{ .steps.fetch.output.body }}", "model": "m"}},
    {"id": "fetch", "uses": "http", "timeout": "10000ms",
     "with": {"url": "http://127.0.0.1:9000/doc", "method": "GET"},
     "retry": {"max_attempts": 3, "backoff": "0.2s", "max_backoff": "2s"}}
  ]
}`

func TestPipeline_ComputeHash_stability(t *testing.T) {
	base, err := Load([]byte(validYAML), nil)
	require.NoError(t, err)
	tests := []struct {
		name string
		doc  string
		same bool
	}{
		{"same document", validYAML, true},
		{"JSON spelling", hashJSON, true},
		{"block style YAML", `
key: summarize-report
description: "fetch then summarize"
steps:
- id: fetch
  uses: http
  with:
    url: http://127.0.0.1:9000/doc
    method: GET
  retry:
    max_attempts: 3
    backoff: 200ms
    max_backoff: 2000ms
  timeout: 10s
- id: summarize
  uses: llm.chat
  needs:
  - fetch
  with:
    model: m
    prompt: "Summarize: {{ .steps.fetch.output.body }}"
`, true},
		{"changed prompt", replaceOnce(validYAML, "Summarize:", "Summarise:"), false},
		{"changed timeout", replaceOnce(validYAML, "timeout: 10s", "timeout: 11s"), false},
		{"changed attempts", replaceOnce(validYAML, "max_attempts: 3", "max_attempts: 4"), false},
		{"changed description", replaceOnce(validYAML, "fetch then summarize", "other"), false},
		{"changed key", replaceOnce(validYAML, "key: summarize-report", "key: other"), false},
		{"changed handler", replaceOnce(validYAML, "uses: http", "uses: echo"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load([]byte(tt.doc), nil)
			require.NoError(t, err)
			if tt.same {
				require.Equal(t, base.Hash, p.Hash)
			} else {
				require.NotEqual(t, base.Hash, p.Hash)
			}
		})
	}
}

func TestPipeline_ComputeHash_goValues(t *testing.T) {
	p1 := &Pipeline{Key: "k", Steps: []Step{{ID: "a", Uses: "echo", With: map[string]any{"n": 3, "l": []string{"x"}}}}}
	p2 := &Pipeline{Key: "k", Steps: []Step{{ID: "a", Uses: "echo", Retry: RetryPolicy{MaxAttempts: 1}, With: map[string]any{"n": 3.0, "l": []any{"x"}}}}}
	h1, err := p1.ComputeHash()
	require.NoError(t, err)
	h2, err := p2.ComputeHash()
	require.NoError(t, err)
	require.Equal(t, h1, h2)
	bad := &Pipeline{Key: "k", Steps: []Step{{ID: "a", With: map[string]any{"c": make(chan int)}}}}
	_, err = bad.ComputeHash()
	require.ErrorIs(t, err, ErrInvalid)
}

func replaceOnce(s, old, repl string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + repl + s[i+len(old):]
		}
	}
	panic("replaceOnce: " + old + " not found")
}
