package client

import (
	"bytes"
	"context"
	"net/http"

	"github.com/dairuntime/dair/internal/api"
)

// Run control operations accepted by ControlRun.
const (
	OpCancel = "cancel"
	OpPause  = "pause"
	OpResume = "resume"
	OpDrain  = "drain"
)

// Submit posts a run (POST /v1/runs) and returns the 202 answer.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (*api.SubmitResponse, error) {
	var out api.SubmitResponse
	if err := c.doJSON(ctx, http.MethodPost, "/v1/runs", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRun returns a run with its steps (GET /v1/runs/{id}).
func (c *Client) GetRun(ctx context.Context, id string) (*api.Run, error) {
	var out api.Run
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+esc(id), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRuns lists runs, optionally filtered by tenant and status (GET /v1/runs).
func (c *Client) ListRuns(ctx context.Context, tenantID, status string) (*api.RunList, error) {
	var out api.RunList
	if err := c.do(ctx, http.MethodGet, "/v1/runs"+query("tenant_id", tenantID, "status", status), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ControlRun applies OpCancel, OpPause or OpResume to a run (POST /v1/runs/{id}/{op}) and
// returns the run after the change.
func (c *Client) ControlRun(ctx context.Context, id, op string) (*api.Run, error) {
	var out api.Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+esc(id)+"/"+esc(op), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListInstances lists runtime instances, optionally those visible to a tenant
// (GET /v1/instances).
func (c *Client) ListInstances(ctx context.Context, tenantID string) (*api.InstanceList, error) {
	var out api.InstanceList
	if err := c.do(ctx, http.MethodGet, "/v1/instances"+query("tenant_id", tenantID), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ControlInstance applies OpPause, OpResume or OpDrain to an instance's queue
// (POST /v1/instances/{id}/{op}) and returns its descriptor after the change.
func (c *Client) ControlInstance(ctx context.Context, id, op string) (*api.Instance, error) {
	var out api.Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances/"+esc(id)+"/"+esc(op), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutTenant stores a tenant's settings (PUT /v1/tenants/{id}) and returns them as stored.
func (c *Client) PutTenant(ctx context.Context, t api.Tenant) (*api.Tenant, error) {
	var out api.Tenant
	if err := c.doJSON(ctx, http.MethodPut, "/v1/tenants/"+esc(t.TenantID), t, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTenant returns a tenant's settings (GET /v1/tenants/{id}).
func (c *Client) GetTenant(ctx context.Context, id string) (*api.Tenant, error) {
	var out api.Tenant
	if err := c.do(ctx, http.MethodGet, "/v1/tenants/"+esc(id), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTenants lists tenants (GET /v1/tenants).
func (c *Client) ListTenants(ctx context.Context) (*api.TenantList, error) {
	var out api.TenantList
	if err := c.do(ctx, http.MethodGet, "/v1/tenants", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ControlTenant suspends (op "suspend") or resumes (op "resume") a tenant
// (POST /v1/tenants/{id}/{op}) and returns its settings after the change.
func (c *Client) ControlTenant(ctx context.Context, id, op string) (*api.Tenant, error) {
	var out api.Tenant
	if err := c.do(ctx, http.MethodPost, "/v1/tenants/"+esc(id)+"/"+esc(op), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ledger returns the durable history of an execution or run (GET /v1/executions/{id}/ledger).
func (c *Client) Ledger(ctx context.Context, id string) (*api.Ledger, error) {
	var out api.Ledger
	if err := c.do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/ledger", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Trace returns the spans of an execution (GET /v1/executions/{id}/trace).
func (c *Client) Trace(ctx context.Context, id string) (*api.Trace, error) {
	var out api.Trace
	if err := c.do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/trace", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Replay replays an execution against its history (POST /v1/executions/{id}/replay). A
// divergence is not an error: check Replay.Diverged.
func (c *Client) Replay(ctx context.Context, id string) (*api.Replay, error) {
	var out api.Replay
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+esc(id)+"/replay", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutPipeline stores a pipeline document (YAML or JSON) under key (PUT /v1/pipelines/{key}).
func (c *Client) PutPipeline(ctx context.Context, key string, src []byte) (*api.Pipeline, error) {
	ct := "application/yaml"
	if trimmed := bytes.TrimSpace(src); len(trimmed) > 0 && trimmed[0] == '{' {
		ct = "application/json"
	}
	var out api.Pipeline
	if err := c.do(ctx, http.MethodPut, "/v1/pipelines/"+esc(key), bytes.NewReader(src), ct, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetPipeline returns the latest version of a pipeline with its source
// (GET /v1/pipelines/{key}).
func (c *Client) GetPipeline(ctx context.Context, key string) (*api.Pipeline, error) {
	var out api.Pipeline
	if err := c.do(ctx, http.MethodGet, "/v1/pipelines/"+esc(key), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListPipelines lists the latest version of every pipeline (GET /v1/pipelines).
func (c *Client) ListPipelines(ctx context.Context) (*api.PipelineList, error) {
	var out api.PipelineList
	if err := c.do(ctx, http.MethodGet, "/v1/pipelines", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DrainQueue runs one manual shared-queue drain cycle (POST /v1/queue/drain).
func (c *Client) DrainQueue(ctx context.Context) (*api.DrainResponse, error) {
	var out api.DrainResponse
	if err := c.do(ctx, http.MethodPost, "/v1/queue/drain", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
