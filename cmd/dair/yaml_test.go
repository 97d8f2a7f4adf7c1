package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestJSONToYAML_keepsTypesAndOrder(t *testing.T) {
	in := `{"z": "true", "a": 1, "s": "plain", "n": null, "l": [1, "2"], "m": {"k": "10"}, "e": {}}`
	out, err := jsonToYAML([]byte(in))
	require.NoError(t, err)
	require.Regexp(t, `(?s)^z: .*a: 1.*s: plain`, string(out), "keys keep their JSON order")
	var back map[string]any
	require.NoError(t, yaml.Unmarshal(out, &back))
	require.Equal(t, map[string]any{"z": "true", "a": 1, "s": "plain", "n": nil, "l": []any{1, "2"},
		"m": map[string]any{"k": "10"}, "e": map[string]any{}}, back, "yaml:\n%s", out)
}
