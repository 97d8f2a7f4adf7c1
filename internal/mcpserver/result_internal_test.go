package mcpserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// A tool error names the problem, not this package.
func TestErrorResult_noPackageName(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: limit %d (want 1..%d)", ErrBadArgument, 0, MaxListRunsLimit),
		fmt.Errorf("%w: shared_run_id", ErrMissingArgument),
		fmt.Errorf("client: GET /v1/runs: %w", errors.New("connection refused")),
	} {
		r := errorResult(err)
		require.True(t, r.IsError)
		text := r.Content[0].(*mcp.TextContent).Text
		msg := r.StructuredContent.(ToolError).Error.Message
		for _, p := range []string{"mcpserver:", "client:"} {
			require.False(t, strings.Contains(text, p), text)
			require.False(t, strings.HasPrefix(msg, p), msg)
		}
	}
}
