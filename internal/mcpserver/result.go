package mcpserver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Error codes of tool errors that do not come from the node.
const (
	// CodeBadArgument marks a tool error for a missing or unusable argument.
	CodeBadArgument = "bad_argument"
	// CodeUnavailable marks a tool error for a node that could not be reached or answered
	// something unreadable.
	CodeUnavailable = "unavailable"
)

// ToolError is the structured content of a tool result with IsError set:
// {"error": {"code", "message", "status"}}. Code and Message are the node's error body
// (see httpapi.ErrorDetail) when the node refused the call, and Status its HTTP status;
// Status is 0 when the node was not reached.
type ToolError struct {
	Error ToolErrorDetail `json:"error"`
}

// ToolErrorDetail is the inside of ToolError.
type ToolErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// errorResult converts err to an IsError tool result. The text content reads
// "<code>: <message> (HTTP <status>)" so that agents and people see why the node refused; the
// message does not start with this module's package names ("bad argument: limit 0 ...").
func errorResult(err error) *mcp.CallToolResult {
	d := ToolErrorDetail{Code: CodeUnavailable, Message: strings.TrimPrefix(strings.TrimPrefix(err.Error(), "mcpserver: "), "client: ")}
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		d = ToolErrorDetail{Code: ce.Code, Message: ce.Message, Status: ce.Status}
		if d.Code == "" {
			d.Code = fmt.Sprintf("http_%d", ce.Status)
		}
	case errors.Is(err, ErrMissingArgument), errors.Is(err, ErrBadArgument):
		d.Code = CodeBadArgument
	}
	text := d.Code + ": " + d.Message
	if d.Status != 0 {
		text = fmt.Sprintf("%s (HTTP %d)", text, d.Status)
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: ToolError{Error: d},
	}
}

// runSummary is a one-line description of a run.
func runSummary(r *httpapi.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (%s, tenant %s): %s", r.SharedRunID, r.Pipeline, r.TenantID, r.Status)
	if len(r.Steps) > 0 {
		ok := 0
		for _, s := range r.Steps {
			if s.Status == messages.StepSucceeded {
				ok++
			}
		}
		fmt.Fprintf(&b, ", %d/%d steps succeeded", ok, len(r.Steps))
	}
	if r.FailureReason != "" {
		fmt.Fprintf(&b, ", reason: %s", r.FailureReason)
	}
	return b.String()
}

// tenantSummary is a one-line description of tenant settings.
func tenantSummary(t *httpapi.Tenant) string {
	s := fmt.Sprintf("tenant %s: %s", t.TenantID, t.IsolationMode)
	if t.Suspended {
		s += " (suspended)"
	}
	return s
}
