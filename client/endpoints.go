package client

import (
	"bytes"
	"context"
	"net/http"
	"strconv"

	"github.com/dairuntime/dair/httpapi"
)

// Run control operations accepted by ControlRun.
const (
	OpCancel = "cancel"
	OpPause  = "pause"
	OpResume = "resume"
	OpDrain  = "drain"
)

// Submit posts a run (POST /v1/runs) and returns the 202 answer.
func (c *Client) Submit(ctx context.Context, req httpapi.SubmitRequest) (*httpapi.SubmitResponse, error) {
	var out httpapi.SubmitResponse
	if err := c.doJSON(ctx, http.MethodPost, "/v1/runs", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRun returns a run with its steps (GET /v1/runs/{id}).
func (c *Client) GetRun(ctx context.Context, id string) (*httpapi.Run, error) {
	var out httpapi.Run
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+esc(id), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRuns lists runs, optionally filtered by tenant and status (GET /v1/runs).
func (c *Client) ListRuns(ctx context.Context, tenantID, status string) (*httpapi.RunList, error) {
	return c.QueryRuns(ctx, RunQuery{TenantID: tenantID, Status: status})
}

// RunQuery filters QueryRuns. Zero fields match everything; Limit 0 is the server's default
// (1000).
type RunQuery struct {
	TenantID string
	Status   string
	Pipeline string
	Limit    int
}

// QueryRuns lists runs, newest first, filtered by q (GET /v1/runs).
func (c *Client) QueryRuns(ctx context.Context, q RunQuery) (*httpapi.RunList, error) {
	limit := ""
	if q.Limit > 0 {
		limit = strconv.Itoa(q.Limit)
	}
	path := "/v1/runs" + query("tenant_id", q.TenantID, "status", q.Status, "pipeline", q.Pipeline, "limit", limit)
	var out httpapi.RunList
	if err := c.do(ctx, http.MethodGet, path, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ControlRun applies OpCancel, OpPause or OpResume to a run (POST /v1/runs/{id}/{op}) and
// returns the run after the change.
func (c *Client) ControlRun(ctx context.Context, id, op string) (*httpapi.Run, error) {
	var out httpapi.Run
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+esc(id)+"/"+esc(op), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListInstances lists runtime instances, optionally those visible to a tenant
// (GET /v1/instances).
func (c *Client) ListInstances(ctx context.Context, tenantID string) (*httpapi.InstanceList, error) {
	var out httpapi.InstanceList
	if err := c.do(ctx, http.MethodGet, "/v1/instances"+query("tenant_id", tenantID), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ControlInstance applies OpPause, OpResume or OpDrain to an instance's queue
// (POST /v1/instances/{id}/{op}) and returns its descriptor after the change.
func (c *Client) ControlInstance(ctx context.Context, id, op string) (*httpapi.Instance, error) {
	var out httpapi.Instance
	if err := c.do(ctx, http.MethodPost, "/v1/instances/"+esc(id)+"/"+esc(op), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutTenant stores a tenant's settings (PUT /v1/tenants/{id}) and returns them as stored.
func (c *Client) PutTenant(ctx context.Context, t httpapi.Tenant) (*httpapi.Tenant, error) {
	var out httpapi.Tenant
	if err := c.doJSON(ctx, http.MethodPut, "/v1/tenants/"+esc(t.TenantID), t, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTenant returns a tenant's settings (GET /v1/tenants/{id}).
func (c *Client) GetTenant(ctx context.Context, id string) (*httpapi.Tenant, error) {
	var out httpapi.Tenant
	if err := c.do(ctx, http.MethodGet, "/v1/tenants/"+esc(id), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTenants lists tenants (GET /v1/tenants).
func (c *Client) ListTenants(ctx context.Context) (*httpapi.TenantList, error) {
	var out httpapi.TenantList
	if err := c.do(ctx, http.MethodGet, "/v1/tenants", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ControlTenant suspends (op "suspend") or resumes (op "resume") a tenant
// (POST /v1/tenants/{id}/{op}) and returns its settings after the change.
func (c *Client) ControlTenant(ctx context.Context, id, op string) (*httpapi.Tenant, error) {
	var out httpapi.Tenant
	if err := c.do(ctx, http.MethodPost, "/v1/tenants/"+esc(id)+"/"+esc(op), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ledger returns the durable history of an execution or run (GET /v1/executions/{id}/ledger).
func (c *Client) Ledger(ctx context.Context, id string) (*httpapi.Ledger, error) {
	var out httpapi.Ledger
	if err := c.do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/ledger", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Trace returns the spans of an execution (GET /v1/executions/{id}/trace).
func (c *Client) Trace(ctx context.Context, id string) (*httpapi.Trace, error) {
	var out httpapi.Trace
	if err := c.do(ctx, http.MethodGet, "/v1/executions/"+esc(id)+"/trace", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Replay replays an execution against its history (POST /v1/executions/{id}/replay). A
// divergence is not an error: check Replay.Diverged.
func (c *Client) Replay(ctx context.Context, id string) (*httpapi.Replay, error) {
	var out httpapi.Replay
	if err := c.do(ctx, http.MethodPost, "/v1/executions/"+esc(id)+"/replay", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutPipeline stores a pipeline document (YAML or JSON) under key (PUT /v1/pipelines/{key}).
func (c *Client) PutPipeline(ctx context.Context, key string, src []byte) (*httpapi.Pipeline, error) {
	ct := "application/yaml"
	if trimmed := bytes.TrimSpace(src); len(trimmed) > 0 && trimmed[0] == '{' {
		ct = "application/json"
	}
	var out httpapi.Pipeline
	if err := c.do(ctx, http.MethodPut, "/v1/pipelines/"+esc(key), bytes.NewReader(src), ct, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetPipeline returns the latest version of a pipeline with its source
// (GET /v1/pipelines/{key}).
func (c *Client) GetPipeline(ctx context.Context, key string) (*httpapi.Pipeline, error) {
	var out httpapi.Pipeline
	if err := c.do(ctx, http.MethodGet, "/v1/pipelines/"+esc(key), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListPipelines lists the latest version of every pipeline (GET /v1/pipelines).
func (c *Client) ListPipelines(ctx context.Context) (*httpapi.PipelineList, error) {
	var out httpapi.PipelineList
	if err := c.do(ctx, http.MethodGet, "/v1/pipelines", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DrainQueue runs one manual shared-queue drain cycle (POST /v1/queue/drain).
func (c *Client) DrainQueue(ctx context.Context) (*httpapi.DrainResponse, error) {
	var out httpapi.DrainResponse
	if err := c.do(ctx, http.MethodPost, "/v1/queue/drain", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CheckPipeline replays the last (the server's default, 100, when 0) recent executions of
// key against the definition src without storing it (POST /v1/pipelines/{key}/check). A
// divergence is not an error: check PipelineCheck.Divergent.
func (c *Client) CheckPipeline(ctx context.Context, key string, src []byte, last int) (*httpapi.PipelineCheck, error) {
	ct := "application/yaml"
	if trimmed := bytes.TrimSpace(src); len(trimmed) > 0 && trimmed[0] == '{' {
		ct = "application/json"
	}
	q := ""
	if last > 0 {
		q = query("last", strconv.Itoa(last))
	}
	var out httpapi.PipelineCheck
	if err := c.do(ctx, http.MethodPost, "/v1/pipelines/"+esc(key)+"/check"+q, bytes.NewReader(src), ct, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
