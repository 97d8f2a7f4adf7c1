package actors

import (
	"context"

	"github.com/dairuntime/dair/internal/dag"
)

// PipelineVersion returns the parsed pipeline key@hash and its graph (the latest version
// when hash is empty), from the node's cache or the store. Both are shared and immutable:
// the caller must not modify them. It blocks on store I/O on a cache miss; an unknown
// version is an error wrapping ErrNotFound.
func (n *Node) PipelineVersion(ctx context.Context, key, hash string) (*dag.Pipeline, *dag.Graph, error) {
	cp, err := n.env.pipelines.get(ctx, key, hash)
	if err != nil {
		return nil, nil, err
	}
	return cp.p, cp.g, nil
}
