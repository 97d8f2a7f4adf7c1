package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Tool names (a contract with MCP clients and agents: keep them exactly).
const (
	ToolSubmitRun        = "submit_run"
	ToolGetRun           = "get_run"
	ToolListRuns         = "list_runs"
	ToolCancelRun        = "cancel_run"
	ToolPauseRun         = "pause_run"
	ToolResumeRun        = "resume_run"
	ToolListInstances    = "list_instances"
	ToolPauseInstance    = "pause_instance"
	ToolResumeInstance   = "resume_instance"
	ToolDrainInstance    = "drain_instance"
	ToolDrainSharedQueue = "drain_shared_queue"
	ToolGetTenant        = "get_tenant"
	ToolPutTenant        = "put_tenant"
	ToolGetLedger        = "get_ledger"
	ToolGetTrace         = "get_trace"
	ToolReplayExecution  = "replay_execution"
)

// ToolNames lists every tool the server registers, in registration order. The caller owns
// the returned slice.
func ToolNames() []string {
	return []string{
		ToolSubmitRun, ToolGetRun, ToolListRuns, ToolCancelRun, ToolPauseRun, ToolResumeRun,
		ToolListInstances, ToolPauseInstance, ToolResumeInstance, ToolDrainInstance, ToolDrainSharedQueue,
		ToolGetTenant, ToolPutTenant, ToolGetLedger, ToolGetTrace, ToolReplayExecution,
		ToolListAgents, ToolSendAgentMessage, ToolPublishMessage,
		ToolListPipelines, ToolGetPipeline,
	}
}

// SubmitRunInput is the input of submit_run.
type SubmitRunInput struct {
	Pipeline       string          `json:"pipeline" jsonschema:"key of a stored pipeline to run"`
	TenantID       string          `json:"tenant_id,omitempty" jsonschema:"tenant to run for; with auth on it defaults to the token's tenant and must equal it"`
	Input          json.RawMessage `json:"input,omitempty" jsonschema:"JSON value the pipeline sees as .input"`
	CorrelationID  string          `json:"correlation_id,omitempty" jsonschema:"caller-chosen id recorded with the run"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"submitting twice with the same key returns the first run"`
	Wait           bool            `json:"wait,omitempty" jsonschema:"wait until the run is final and return the final run instead of the submit answer"`
}

// RunInput is the input of get_run, cancel_run, pause_run and resume_run.
type RunInput struct {
	SharedRunID string `json:"shared_run_id" jsonschema:"the run's shared run id (as returned by submit_run)"`
}

// ListRunsInput is the input of list_runs.
type ListRunsInput struct {
	TenantID string `json:"tenant_id,omitempty" jsonschema:"only runs of this tenant"`
	Status   string `json:"status,omitempty" jsonschema:"only runs in this status: queued, scale_out_requested, dispatched, running, paused, succeeded, failed or cancelled"`
	Pipeline string `json:"pipeline,omitempty" jsonschema:"only runs of this pipeline key"`
	Limit    int    `json:"limit,omitempty" jsonschema:"at most this many runs, newest first: 1..1000, default 20"`
}

// ListInstancesInput is the input of list_instances.
type ListInstancesInput struct {
	TenantID string `json:"tenant_id,omitempty" jsonschema:"only instances visible to this tenant"`
}

// InstanceInput is the input of pause_instance, resume_instance and drain_instance.
type InstanceInput struct {
	RuntimeInstanceID string `json:"runtime_instance_id" jsonschema:"the runtime instance id (see list_instances)"`
}

// EmptyInput is the input of tools without arguments (drain_shared_queue).
type EmptyInput struct{}

// TenantInput is the input of get_tenant.
type TenantInput struct {
	TenantID string `json:"tenant_id" jsonschema:"the tenant id"`
}

// PutTenantInput is the input of put_tenant. Zero numeric fields take the node's defaults.
type PutTenantInput struct {
	TenantID                     string  `json:"tenant_id" jsonschema:"the tenant id"`
	IsolationMode                string  `json:"isolation_mode" jsonschema:"shared, dedicated or hybrid"`
	PreferDedicatedCapacity      bool    `json:"prefer_dedicated_capacity,omitempty" jsonschema:"hybrid: try the tenant's dedicated instances first"`
	AllowSharedFallback          bool    `json:"allow_shared_fallback,omitempty" jsonschema:"hybrid: fall back to shared instances when dedicated ones are full"`
	RuntimeInstanceIDPrefix      string  `json:"runtime_instance_id_prefix,omitempty" jsonschema:"prefix of the ids of the tenant's dedicated instances"`
	MaxRuntimeInstances          int32   `json:"max_runtime_instances,omitempty" jsonschema:"upper bound of dedicated instances scale-out may create"`
	WorkerCountPerInstance       int32   `json:"worker_count_per_instance,omitempty" jsonschema:"workers of each dedicated instance"`
	MaxConcurrentRunsPerInstance int32   `json:"max_concurrent_runs_per_instance,omitempty" jsonschema:"runs one dedicated instance executes at once"`
	LocalQueueCapacity           int32   `json:"local_queue_capacity,omitempty" jsonschema:"queue capacity of each dedicated instance"`
	Weight                       int32   `json:"weight,omitempty" jsonschema:"fair share of contended shared capacity (default 1)"`
	MaxConcurrentRuns            int32   `json:"max_concurrent_runs,omitempty" jsonschema:"dispatched and running runs across all instances (0: unlimited)"`
	MaxQueuedRuns                int32   `json:"max_queued_runs,omitempty" jsonschema:"queued runs beyond which a submit is refused (0: unlimited)"`
	RunsPerSecond                float64 `json:"runs_per_second,omitempty" jsonschema:"dispatch rate limit (0: unlimited)"`
	RunsBurst                    int32   `json:"runs_burst,omitempty" jsonschema:"dispatch rate burst (0: ceil of runs_per_second)"`
}

// ExecutionInput is the input of get_ledger, get_trace and replay_execution.
type ExecutionInput struct {
	ExecutionID string `json:"execution_id" jsonschema:"an execution id (a run's execution_id) or a shared run id"`
}

// call is a tool body: it returns the structured answer and a one-line summary.
type call[In any] func(ctx context.Context, c *client.Client, in In) (out any, summary string, err error)

// add registers one tool whose body is fn. Errors of fn become IsError results.
func add[In any](s *mcp.Server, svc *service, t *mcp.Tool, fn call[In]) {
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		out, summary, err := fn(ctx, svc.client(req), in)
		if err != nil {
			svc.cfg.Logger.Debug("mcp tool failed", zap.String("tool", t.Name), zap.Error(err))
			return errorResult(err), nil, nil
		}
		svc.cfg.Logger.Debug("mcp tool", zap.String("tool", t.Name))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary}}}, out, nil
	})
}

// tool builds a tool descriptor; readOnly and idempotent set the annotations' hints.
func tool(name, desc string, readOnly, idempotent bool) *mcp.Tool {
	ann := &mcp.ToolAnnotations{ReadOnlyHint: readOnly, IdempotentHint: readOnly || idempotent}
	if !readOnly {
		destructive := false
		ann.DestructiveHint = &destructive
	}
	return &mcp.Tool{Name: name, Description: desc, Annotations: ann}
}

// need returns ErrMissingArgument naming arg when v is blank.
func need(arg, v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("%w: %s", ErrMissingArgument, arg)
	}
	return nil
}

// registerTools adds every tool of ToolNames to s.
func registerTools(s *mcp.Server, svc *service) {
	addExact(s, svc, tool(ToolSubmitRun, "Submit a run of a stored pipeline. Returns {shared_run_id, status}; "+
		"with wait=true blocks until the run is final and returns the run.", false, false), submitRun)
	add(s, svc, tool(ToolGetRun, "Get a run with its steps, status, output and failure reason.", true, false),
		func(ctx context.Context, c *client.Client, in RunInput) (any, string, error) {
			if err := need("shared_run_id", in.SharedRunID); err != nil {
				return nil, "", err
			}
			r, err := c.GetRun(ctx, in.SharedRunID)
			if err != nil {
				return nil, "", err
			}
			return r, runSummary(r), nil
		})
	add(s, svc, tool(ToolListRuns, "List runs, newest first (default 20, at most 1000), optionally of one tenant, "+
		"status and/or pipeline. Each run is a summary without input, output or steps: get_run has them.", true, false), listRuns)
	for _, op := range []struct{ name, op, desc string }{
		{ToolCancelRun, client.OpCancel, "Cancel a run. Returns the run after the change."},
		{ToolPauseRun, client.OpPause, "Pause a run: no new step starts until it is resumed. Returns the run."},
		{ToolResumeRun, client.OpResume, "Resume a paused run. Returns the run."},
	} {
		add(s, svc, tool(op.name, op.desc, false, true),
			func(ctx context.Context, c *client.Client, in RunInput) (any, string, error) {
				if err := need("shared_run_id", in.SharedRunID); err != nil {
					return nil, "", err
				}
				r, err := c.ControlRun(ctx, in.SharedRunID, op.op)
				if err != nil {
					return nil, "", err
				}
				return r, runSummary(r), nil
			})
	}
	add(s, svc, tool(ToolListInstances, "List runtime instances with their capacity descriptors, optionally "+
		"those visible to one tenant.", true, false),
		func(ctx context.Context, c *client.Client, in ListInstancesInput) (any, string, error) {
			l, err := c.ListInstances(ctx, in.TenantID)
			if err != nil {
				return nil, "", err
			}
			return l, fmt.Sprintf("%d instance(s)", len(l.Instances)), nil
		})
	for _, op := range []struct{ name, op, desc string }{
		{ToolPauseInstance, client.OpPause, "Pause a runtime instance's queue: it accepts no new runs. Operator role."},
		{ToolResumeInstance, client.OpResume, "Resume a runtime instance's queue. Operator role."},
		{ToolDrainInstance, client.OpDrain, "Drain a runtime instance: it finishes its runs and accepts no new ones. Operator role."},
	} {
		add(s, svc, tool(op.name, op.desc, false, true),
			func(ctx context.Context, c *client.Client, in InstanceInput) (any, string, error) {
				if err := need("runtime_instance_id", in.RuntimeInstanceID); err != nil {
					return nil, "", err
				}
				d, err := c.ControlInstance(ctx, in.RuntimeInstanceID, op.op)
				if err != nil {
					return nil, "", err
				}
				return d, fmt.Sprintf("instance %s: %s, queue paused %t, draining %t, can accept run %t",
					d.RuntimeInstanceID, d.Status, d.IsQueuePaused, d.IsDraining, d.CanAcceptRun), nil
			})
	}
	add(s, svc, tool(ToolDrainSharedQueue, "Run one manual shared-queue drain cycle. Operator role.", false, false),
		func(ctx context.Context, c *client.Client, _ EmptyInput) (any, string, error) {
			d, err := c.DrainQueue(ctx)
			if err != nil {
				return nil, "", err
			}
			return d, fmt.Sprintf("claimed %d queued run(s)", d.Claimed), nil
		})
	registerTenantTools(s, svc)
	registerHistoryTools(s, svc)
	registerAgentTools(s, svc)
	registerPipelineTools(s, svc)
}

// submitRun is the body of submit_run.
func submitRun(ctx context.Context, c *client.Client, in SubmitRunInput) (any, string, error) {
	if err := need("pipeline", in.Pipeline); err != nil {
		return nil, "", err
	}
	req := httpapi.SubmitRequest{Pipeline: in.Pipeline, TenantID: in.TenantID, CorrelationID: in.CorrelationID,
		IdempotencyKey: in.IdempotencyKey}
	if len(in.Input) > 0 {
		req.Input = in.Input
	}
	sub, err := c.Submit(ctx, req)
	if err != nil {
		return nil, "", err
	}
	if !in.Wait {
		return sub, fmt.Sprintf("run %s submitted (%s)", sub.SharedRunID, sub.Status), nil
	}
	r, err := c.Follow(ctx, sub.SharedRunID, func(int64, string, []byte) error { return nil })
	if err != nil {
		return nil, "", fmt.Errorf("mcpserver: wait for run %s: %w", sub.SharedRunID, err)
	}
	return r, runSummary(r), nil
}

// registerTenantTools adds get_tenant and put_tenant.
func registerTenantTools(s *mcp.Server, svc *service) {
	add(s, svc, tool(ToolGetTenant, "Get a tenant's isolation settings. A tenant that was never put is not found (it still submits, as shared).", true, false),
		func(ctx context.Context, c *client.Client, in TenantInput) (any, string, error) {
			if err := need("tenant_id", in.TenantID); err != nil {
				return nil, "", err
			}
			t, err := c.GetTenant(ctx, in.TenantID)
			if err != nil {
				return nil, "", err
			}
			return t, tenantSummary(t), nil
		})
	add(s, svc, tool(ToolPutTenant, "Store a tenant's isolation settings (shared, dedicated or hybrid). Admin role.",
		false, true), putTenant)
}

// putTenant is the body of put_tenant.
func putTenant(ctx context.Context, c *client.Client, in PutTenantInput) (any, string, error) {
	if err := need("tenant_id", in.TenantID); err != nil {
		return nil, "", err
	}
	if err := need("isolation_mode", in.IsolationMode); err != nil {
		return nil, "", err
	}
	switch in.IsolationMode {
	case messages.IsolationShared, messages.IsolationDedicated, messages.IsolationHybrid:
	default:
		return nil, "", fmt.Errorf("%w: isolation_mode %q (want %s, %s or %s)", ErrBadArgument, in.IsolationMode,
			messages.IsolationShared, messages.IsolationDedicated, messages.IsolationHybrid)
	}
	t, err := c.PutTenant(ctx, httpapi.Tenant{
		TenantID: in.TenantID, IsolationMode: in.IsolationMode, PreferDedicatedCapacity: in.PreferDedicatedCapacity,
		AllowSharedFallback: in.AllowSharedFallback, RuntimeInstanceIDPrefix: in.RuntimeInstanceIDPrefix,
		MaxRuntimeInstances: in.MaxRuntimeInstances, WorkerCountPerInstance: in.WorkerCountPerInstance,
		MaxConcurrentRunsPerInstance: in.MaxConcurrentRunsPerInstance, LocalQueueCapacity: in.LocalQueueCapacity,
		Weight: in.Weight, MaxConcurrentRuns: in.MaxConcurrentRuns, MaxQueuedRuns: in.MaxQueuedRuns,
		RunsPerSecond: in.RunsPerSecond, RunsBurst: in.RunsBurst,
	})
	if err != nil {
		return nil, "", err
	}
	return t, tenantSummary(t), nil
}

// registerHistoryTools adds get_ledger, get_trace and replay_execution.
func registerHistoryTools(s *mcp.Server, svc *service) {
	add(s, svc, tool(ToolGetLedger, "Get the durable ledger (history entries) of an execution or run.", true, false),
		func(ctx context.Context, c *client.Client, in ExecutionInput) (any, string, error) {
			if err := need("execution_id", in.ExecutionID); err != nil {
				return nil, "", err
			}
			l, err := c.Ledger(ctx, in.ExecutionID)
			if err != nil {
				return nil, "", err
			}
			return l, fmt.Sprintf("ledger of %s: %d entries", l.ExecutionID, len(l.Entries)), nil
		})
	add(s, svc, tool(ToolGetTrace, "Get the trace spans of an execution.", true, false),
		func(ctx context.Context, c *client.Client, in ExecutionInput) (any, string, error) {
			if err := need("execution_id", in.ExecutionID); err != nil {
				return nil, "", err
			}
			t, err := c.Trace(ctx, in.ExecutionID)
			if err != nil {
				return nil, "", err
			}
			return t, fmt.Sprintf("trace of %s: %d spans", t.ExecutionID, len(t.Spans)), nil
		})
	add(s, svc, tool(ToolReplayExecution, "Replay an execution against its recorded history and report divergences. "+
		"A divergence is a normal answer (diverged=true), not an error.", true, false),
		func(ctx context.Context, c *client.Client, in ExecutionInput) (any, string, error) {
			if err := need("execution_id", in.ExecutionID); err != nil {
				return nil, "", err
			}
			r, err := c.Replay(ctx, in.ExecutionID)
			if err != nil {
				return nil, "", err
			}
			if r.Diverged {
				return r, fmt.Sprintf("replay of %s diverged at %d step(s)", r.ExecutionID, len(r.Divergences)), nil
			}
			return r, fmt.Sprintf("replay of %s matches its history (%d steps replayed)", r.ExecutionID, r.Replayed), nil
		})
}
