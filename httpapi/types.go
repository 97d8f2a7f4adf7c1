package httpapi

import (
	"encoding/json"
	"time"
)

// SubmitRequest is the body of POST /v1/runs. With auth on, TenantID may be empty (the token's
// tenant is used) and must otherwise equal the token's tenant.
type SubmitRequest struct {
	Pipeline       string          `json:"pipeline"`
	TenantID       string          `json:"tenant_id,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// InvokeRequest is the body of POST /v1/sessions/{session_id}/invoke.
type InvokeRequest struct {
	Pipeline       string          `json:"pipeline"`
	TenantID       string          `json:"tenant_id,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// SubmitResponse is the 202 answer of POST /v1/runs.
type SubmitResponse struct {
	SharedRunID string `json:"shared_run_id"`
	Status      string `json:"status"`
}

// ErrorBody is the body of every 4xx/5xx answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody. Code is a stable snake_case name.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of ErrorDetail.Code.
const (
	CodeBadRequest      = "bad_request"
	CodeInvalidPipeline = "invalid_pipeline"
	CodeInvalidSettings = "invalid_settings"
	CodeUnknownPipeline = "unknown_pipeline"
	CodeNotFound        = "not_found"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeNotRunning      = "not_running"
	CodeRequestTooLarge = "request_too_large"
	CodeTenantSuspended = "tenant_suspended"
	CodeNoCapacity      = "no_capacity"
	// CodeTenantQueueFull answers a submit beyond the tenant's max_queued_runs (429, with
	// Retry-After).
	CodeTenantQueueFull  = "tenant_queue_full"
	CodeInternal         = "internal"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeNotImplemented   = "not_implemented"
	CodeStoreUnavailable = "store_unavailable"
	// CodeIdempotencyConflict (409) answers a submit whose idempotency key an earlier run of
	// another pipeline or input holds.
	CodeIdempotencyConflict = "idempotency_conflict"
	// CodeInvalidInput (400) answers a submit whose input does not match the pipeline's
	// input_schema, or lacks a field its templates use.
	CodeInvalidInput = "invalid_input"
	// CodeNodeStopping (503, with Retry-After) answers a request that reaches a node while it
	// shuts down; another node, or this one once restarted, takes it.
	CodeNodeStopping = "node_stopping"
)

// Run is a shared run with its steps.
type Run struct {
	SharedRunID               string `json:"shared_run_id"`
	TenantID                  string `json:"tenant_id"`
	TenantGroupID             string `json:"tenant_group_id,omitempty"`
	Pipeline                  string `json:"pipeline"`
	PipelineHash              string `json:"pipeline_hash"`
	Status                    string `json:"status"`
	AssignedRuntimeInstanceID string `json:"assigned_runtime_instance_id"`
	PumpRuntimeInstanceID     string `json:"pump_runtime_instance_id"`
	ExecutionID               string `json:"execution_id"`
	LocalRunID                string `json:"local_run_id"`
	Attempts                  int32  `json:"attempts"`
	FailureReason             string `json:"failure_reason"`
	// WaitingReason says why a queued run waits (fair-share, tenant-concurrency-quota,
	// tenant-rate-limit, no-free-slot, ...); empty once the run left the queue.
	WaitingReason  string          `json:"waiting_reason,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	SessionID      string          `json:"session_id,omitempty"`
	Steps          []Step          `json:"steps"`
}

// Step is the committed state of one step of a run's execution.
type Step struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Attempts   int32           `json:"attempts"`
	StartedAt  *time.Time      `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	// Needs lists the steps this one depends on (the pipeline's `needs`), so a client can
	// draw the run's DAG. Steps are listed in graph order: by level, then by id.
	Needs []string `json:"needs,omitempty"`
}

// RunList is the answer of GET /v1/runs.
type RunList struct {
	Runs []Run `json:"runs"`
}

// Instance is a runtime instance's capacity descriptor.
type Instance struct {
	RuntimeInstanceID           string            `json:"runtime_instance_id"`
	ControlPlaneID              string            `json:"control_plane_id"`
	HostID                      string            `json:"host_id"`
	ProviderName                string            `json:"provider_name"`
	TransportName               string            `json:"transport_name"`
	Endpoint                    string            `json:"endpoint"`
	Status                      string            `json:"status"`
	WorkerCount                 int32             `json:"worker_count"`
	ActiveWorkerCount           int32             `json:"active_worker_count"`
	AvailableWorkerCount        int32             `json:"available_worker_count"`
	MaxLocalWorkersPerExecution int32             `json:"max_local_workers_per_execution"`
	QueuedRunCount              int32             `json:"queued_run_count"`
	RunningRunCount             int32             `json:"running_run_count"`
	ActiveRunCount              int32             `json:"active_run_count"`
	QueueCapacity               int32             `json:"queue_capacity"`
	MaxConcurrentRuns           int32             `json:"max_concurrent_runs"`
	AvailableRunSlots           int32             `json:"available_run_slots"`
	IsQueuePaused               bool              `json:"is_queue_paused"`
	IsDraining                  bool              `json:"is_draining"`
	CanAcceptRun                bool              `json:"can_accept_run"`
	TenantID                    string            `json:"tenant_id"`
	TenantGroupID               string            `json:"tenant_group_id"`
	IsolationMode               string            `json:"isolation_mode"`
	PreferDedicatedCapacity     bool              `json:"prefer_dedicated_capacity"`
	AllowSharedFallback         bool              `json:"allow_shared_fallback"`
	RuntimeInstanceIDPrefix     string            `json:"runtime_instance_id_prefix"`
	LastHeartbeatAt             time.Time         `json:"last_heartbeat_at"`
	Metadata                    map[string]string `json:"metadata"`
	NodeID                      string            `json:"node_id,omitempty"`
}

// InstanceList is the answer of GET /v1/instances.
type InstanceList struct {
	Instances []Instance `json:"instances"`
}

// Tenant is a tenant's settings. It is also the body of PUT /v1/tenants/{id}, where TenantID
// may be empty (the path names the tenant) and zero numeric fields take their defaults.
type Tenant struct {
	TenantID                     string `json:"tenant_id"`
	TenantGroupID                string `json:"tenant_group_id"`
	IsolationMode                string `json:"isolation_mode"`
	PreferDedicatedCapacity      bool   `json:"prefer_dedicated_capacity"`
	AllowSharedFallback          bool   `json:"allow_shared_fallback"`
	RuntimeInstanceIDPrefix      string `json:"runtime_instance_id_prefix"`
	MaxRuntimeInstances          int32  `json:"max_runtime_instances"`
	WorkerCountPerInstance       int32  `json:"worker_count_per_instance"`
	MaxConcurrentRunsPerInstance int32  `json:"max_concurrent_runs_per_instance"`
	LocalQueueCapacity           int32  `json:"local_queue_capacity"`
	MaxLocalWorkersPerExecution  int32  `json:"max_local_workers_per_execution,omitempty"`
	Suspended                    bool   `json:"suspended"`
	// Weight is the tenant's fair share of contended shared capacity (0 in a PUT: 1).
	Weight int32 `json:"weight"`
	// MaxConcurrentRuns caps the tenant's dispatched and running runs across all instances.
	MaxConcurrentRuns int32 `json:"max_concurrent_runs"`
	// MaxQueuedRuns caps the tenant's queued runs: a submit beyond it answers 429.
	MaxQueuedRuns int32 `json:"max_queued_runs"`
	// RunsPerSecond caps the tenant's dispatch rate (a token bucket of RunsBurst).
	RunsPerSecond float64 `json:"runs_per_second"`
	RunsBurst     int32   `json:"runs_burst"`
}

// TenantList is the answer of GET /v1/tenants.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// LedgerEntry is one durable history record of a shared run. It is also the data of each SSE
// event of GET /v1/runs/{id}/events.
type LedgerEntry struct {
	Seq               int64           `json:"seq"`
	At                time.Time       `json:"at"`
	Kind              string          `json:"kind"`
	SharedRunID       string          `json:"shared_run_id"`
	TenantID          string          `json:"tenant_id,omitempty"`
	ExecutionID       string          `json:"execution_id,omitempty"`
	RuntimeInstanceID string          `json:"runtime_instance_id,omitempty"`
	StepID            string          `json:"step_id,omitempty"`
	Attempt           int32           `json:"attempt,omitempty"`
	Epoch             int64           `json:"epoch,omitempty"`
	Reason            string          `json:"reason,omitempty"`
	Data              json.RawMessage `json:"data,omitempty"`
}

// Ledger is the answer of GET /v1/executions/{id}/ledger.
type Ledger struct {
	ExecutionID string        `json:"execution_id"`
	Entries     []LedgerEntry `json:"entries"`
}

// Span is one timed span of an execution's trace.
type Span struct {
	Name       string         `json:"name"`
	Kind       string         `json:"kind"`
	Start      time.Time      `json:"start"`
	End        time.Time      `json:"end"`
	Attributes map[string]any `json:"attributes"`
}

// Trace is the answer of GET /v1/executions/{id}/trace.
type Trace struct {
	ExecutionID string `json:"execution_id"`
	Spans       []Span `json:"spans"`
}

// Divergence is one step whose replay differs from its recorded history.
type Divergence struct {
	StepID string `json:"step_id"`
	Reason string `json:"reason"`
}

// Replay is the answer of POST /v1/executions/{id}/replay (200 whether or not it diverged).
type Replay struct {
	ExecutionID string       `json:"execution_id"`
	Diverged    bool         `json:"diverged"`
	Divergences []Divergence `json:"divergences"`
	// Replayed counts the steps whose recorded output was fed forward.
	Replayed int `json:"replayed"`
}

// Pipeline is a stored pipeline version. Source (the document as submitted) is set by
// GET /v1/pipelines/{key} and PUT, not by the list.
type Pipeline struct {
	Key       string    `json:"key"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	Source    string    `json:"source,omitempty"`
	// Description is the pipeline's description.
	Description string `json:"description,omitempty"`
	// Steps is the number of steps.
	Steps int `json:"steps,omitempty"`
	// InputSchema is the JSON Schema run inputs must match (absent when none is declared).
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Warnings (PUT only) are problems that do not prevent storing the pipeline, such as
	// templates that use input fields while no input_schema lets submit check them.
	Warnings []string `json:"warnings,omitempty"`
}

// PipelineList is the answer of GET /v1/pipelines.
type PipelineList struct {
	Pipelines []Pipeline `json:"pipelines"`
}

// DrainResponse is the answer of POST /v1/queue/drain.
type DrainResponse struct {
	Claimed int `json:"claimed"`
}

// Health is the answer of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
}

// UsageEvent is one metering event in GET /v1/tenants/{id}/usage: kind "run" (one per finished
// run) or "step" (one per finished step, with its duration, attempts and LLM tokens).
type UsageEvent struct {
	Kind             string    `json:"kind"`
	TenantID         string    `json:"tenant_id"`
	SharedRunID      string    `json:"shared_run_id"`
	ExecutionID      string    `json:"execution_id,omitempty"`
	StepID           string    `json:"step_id,omitempty"`
	Handler          string    `json:"handler,omitempty"`
	DurationMS       int64     `json:"duration_ms"`
	Attempts         int32     `json:"attempts"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	At               time.Time `json:"at"`
}

// UsageTotals sums a usage report: runs and steps count events of each kind; the other fields
// add up the step events.
type UsageTotals struct {
	Runs             int64 `json:"runs"`
	Steps            int64 `json:"steps"`
	DurationMS       int64 `json:"duration_ms"`
	Attempts         int64 `json:"attempts"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// UsageReport is the answer of GET /v1/tenants/{id}/usage. From and To echo the query (null
// when unbounded).
type UsageReport struct {
	TenantID string       `json:"tenant_id"`
	From     *time.Time   `json:"from"`
	To       *time.Time   `json:"to"`
	Events   []UsageEvent `json:"events"`
	Totals   UsageTotals  `json:"totals"`
}

// ClusterMember is one alive cluster member as seen by the answering node (GET
// /v1/cluster/members). ID is the member (actor system) id, which changes whenever the node
// restarts its actor system; NodeID is the stable logical node id; Address is the actor remote
// host:port.
type ClusterMember struct {
	ID      string   `json:"id"`
	NodeID  string   `json:"node_id"`
	Address string   `json:"address"`
	Roles   []string `json:"roles"`
}

// MemberList is the answer of GET /v1/cluster/members. Self is the answering node's member
// id.
type MemberList struct {
	Self    string          `json:"self"`
	Members []ClusterMember `json:"members"`
}

// CheckDivergence is one place where an execution would diverge from a new definition.
type CheckDivergence struct {
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	Reason      string `json:"reason"`
}

// PipelineCheck is the answer of POST /v1/pipelines/{key}/check: how many recent executions
// of the key were replayed against the posted definition, and every divergence found (empty
// when the new definition is compatible with all of them).
type PipelineCheck struct {
	Key       string            `json:"key"`
	Checked   int               `json:"checked"`
	Divergent []CheckDivergence `json:"divergent"`
}

// Whoami is the answer of GET /v1/whoami: the caller as the node sees it. With auth none the
// caller is "anonymous" with the admin role and no tenant.
type Whoami struct {
	Subject   string     `json:"subject"`
	TenantID  string     `json:"tenant_id,omitempty"`
	OrgID     string     `json:"org_id,omitempty"`
	Roles     []string   `json:"roles"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Auth is "jwt" when tokens are verified, "none" otherwise.
	Auth string `json:"auth"`
}
