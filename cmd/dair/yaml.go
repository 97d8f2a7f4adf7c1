package main

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// jsonToYAML re-encodes a JSON document as block-style YAML, keeping the order of its keys.
// JSON is YAML, so the document is decoded as a YAML node tree; only the flow style of its
// mappings and sequences is dropped (scalars keep the quoting that keeps their types).
func jsonToYAML(b []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return buf.Bytes(), nil
}

// blockStyle clears the flow style of every mapping and sequence under n, and the quoting of
// strings that need none (the encoder quotes again those that would change type).
func blockStyle(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		n.Style &^= yaml.FlowStyle
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			n.Style &^= yaml.DoubleQuotedStyle
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
