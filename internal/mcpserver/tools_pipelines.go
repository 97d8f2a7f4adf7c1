package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
)

// Tool names of pipeline discovery.
const (
	ToolListPipelines = "list_pipelines"
	ToolGetPipeline   = "get_pipeline"
)

// Bounds of list_runs.
const (
	// DefaultListRunsLimit is list_runs' limit when none is given.
	DefaultListRunsLimit = 20
	// MaxListRunsLimit is the largest limit list_runs accepts.
	MaxListRunsLimit = 1000
)

// PipelineInput is the input of get_pipeline.
type PipelineInput struct {
	Key string `json:"key" jsonschema:"the pipeline key (see list_pipelines)"`
}

// RunSummary is one run as list_runs answers it: its identity and state, without the
// input, output and steps (get_run has them).
type RunSummary struct {
	SharedRunID   string    `json:"shared_run_id"`
	TenantID      string    `json:"tenant_id"`
	Pipeline      string    `json:"pipeline"`
	Status        string    `json:"status"`
	ExecutionID   string    `json:"execution_id,omitempty"`
	Attempts      int32     `json:"attempts"`
	FailureReason string    `json:"failure_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// RunSummaryList is the answer of list_runs.
type RunSummaryList struct {
	Runs []RunSummary `json:"runs"`
}

// listRuns is the body of list_runs: at most limit (default DefaultListRunsLimit) runs,
// newest first, as summaries.
func listRuns(ctx context.Context, c *client.Client, in ListRunsInput) (any, string, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = DefaultListRunsLimit
	case limit < 0 || limit > MaxListRunsLimit:
		return nil, "", fmt.Errorf("%w: limit %d (want 1..%d)", ErrBadArgument, limit, MaxListRunsLimit)
	}
	l, err := c.QueryRuns(ctx, client.RunQuery{TenantID: in.TenantID, Status: in.Status, Pipeline: in.Pipeline, Limit: limit})
	if err != nil {
		return nil, "", err
	}
	out := RunSummaryList{Runs: make([]RunSummary, 0, len(l.Runs))}
	for _, r := range l.Runs {
		out.Runs = append(out.Runs, RunSummary{SharedRunID: r.SharedRunID, TenantID: r.TenantID, Pipeline: r.Pipeline,
			Status: r.Status, ExecutionID: r.ExecutionID, Attempts: r.Attempts, FailureReason: r.FailureReason,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
	}
	return out, fmt.Sprintf("%d run(s), newest first (limit %d); get_run shows one with its input, output and steps",
		len(out.Runs), limit), nil
}

// registerPipelineTools adds list_pipelines and get_pipeline.
func registerPipelineTools(s *mcp.Server, svc *service) {
	add(s, svc, tool(ToolListPipelines, "List the pipelines that submit_run can run: key, description, step count "+
		"and input_schema (the JSON Schema a run's input must match, when declared).", true, false),
		func(ctx context.Context, c *client.Client, _ EmptyInput) (any, string, error) {
			l, err := c.ListPipelines(ctx)
			if err != nil {
				return nil, "", err
			}
			return l, fmt.Sprintf("%d pipeline(s)", len(l.Pipelines)), nil
		})
	add(s, svc, tool(ToolGetPipeline, "Get a pipeline's latest definition: its source document (steps, handlers, "+
		"templates), description and input_schema.", true, false),
		func(ctx context.Context, c *client.Client, in PipelineInput) (any, string, error) {
			if err := need("key", in.Key); err != nil {
				return nil, "", err
			}
			p, err := c.GetPipeline(ctx, in.Key)
			if err != nil {
				return nil, "", err
			}
			return p, pipelineSummary(p), nil
		})
}

// pipelineSummary is a one-line description of a pipeline.
func pipelineSummary(p *httpapi.Pipeline) string {
	s := fmt.Sprintf("pipeline %s: %d step(s)", p.Key, p.Steps)
	if p.Description != "" {
		s += ", " + p.Description
	}
	if len(p.InputSchema) > 0 {
		s += "; input_schema " + string(p.InputSchema)
	}
	return s
}
