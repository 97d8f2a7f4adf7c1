package api

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/dairuntime/dair/messages"
)

// The JSON views below are the wire format of the HTTP API (CONTRACT.md, "HTTP API"). Field
// names are a contract: clients such as the dair CLI decode into these same types. Times are
// RFC 3339 UTC; input, output and ledger data are raw JSON.

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
	CodeBadRequest       = "bad_request"
	CodeInvalidPipeline  = "invalid_pipeline"
	CodeInvalidSettings  = "invalid_settings"
	CodeUnknownPipeline  = "unknown_pipeline"
	CodeNotFound         = "not_found"
	CodeUnauthenticated  = "unauthenticated"
	CodeForbidden        = "forbidden"
	CodeNotRunning       = "not_running"
	CodeRequestTooLarge  = "request_too_large"
	CodeTenantSuspended  = "tenant_suspended"
	CodeNoCapacity       = "no_capacity"
	CodeInternal         = "internal"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeNotImplemented   = "not_implemented"
	CodeStoreUnavailable = "store_unavailable"
)

// Run is a shared run with its steps.
type Run struct {
	SharedRunID               string          `json:"shared_run_id"`
	TenantID                  string          `json:"tenant_id"`
	TenantGroupID             string          `json:"tenant_group_id,omitempty"`
	Pipeline                  string          `json:"pipeline"`
	PipelineHash              string          `json:"pipeline_hash"`
	Status                    string          `json:"status"`
	AssignedRuntimeInstanceID string          `json:"assigned_runtime_instance_id"`
	PumpRuntimeInstanceID     string          `json:"pump_runtime_instance_id"`
	ExecutionID               string          `json:"execution_id"`
	LocalRunID                string          `json:"local_run_id"`
	Attempts                  int32           `json:"attempts"`
	FailureReason             string          `json:"failure_reason"`
	Input                     json.RawMessage `json:"input,omitempty"`
	Output                    json.RawMessage `json:"output,omitempty"`
	CreatedAt                 time.Time       `json:"created_at"`
	UpdatedAt                 time.Time       `json:"updated_at"`
	CorrelationID             string          `json:"correlation_id,omitempty"`
	IdempotencyKey            string          `json:"idempotency_key,omitempty"`
	SessionID                 string          `json:"session_id,omitempty"`
	Steps                     []Step          `json:"steps"`
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

// unixTime converts unix nanos to a UTC time; 0 is the zero time.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// optTime converts unix nanos to a UTC time, nil for 0.
func optTime(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// rawJSON returns b as raw JSON: nil when empty, a JSON string when b is not valid JSON.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(append([]byte(nil), b...))
	}
	s, err := json.Marshal(string(b))
	if err != nil {
		return nil
	}
	return s
}

// RunFromMessage converts a shared run and its step states (either may be nil steps) to the
// JSON view. Steps are sorted by id.
func RunFromMessage(r *messages.SharedRun, steps []*messages.StepState) Run {
	out := Run{
		SharedRunID: r.GetSharedRunId(), TenantID: r.GetTenantId(), TenantGroupID: r.GetTenantGroupId(),
		Pipeline: r.GetPipeline(), PipelineHash: r.GetPipelineHash(), Status: r.GetStatus(),
		AssignedRuntimeInstanceID: r.GetAssignedRuntimeInstanceId(), PumpRuntimeInstanceID: r.GetPumpRuntimeInstanceId(),
		ExecutionID: r.GetExecutionId(), LocalRunID: r.GetLocalRunId(), Attempts: r.GetAttempts(),
		FailureReason: r.GetFailureReason(), Input: rawJSON(r.GetInput()), Output: rawJSON(r.GetOutput()),
		CreatedAt: unixTime(r.GetCreatedAt()), UpdatedAt: unixTime(r.GetUpdatedAt()),
		CorrelationID: r.GetCorrelationId(), IdempotencyKey: r.GetIdempotencyKey(), SessionID: r.GetSessionId(),
		Steps: make([]Step, 0, len(steps)),
	}
	for _, s := range steps {
		out.Steps = append(out.Steps, StepFromMessage(s))
	}
	sort.Slice(out.Steps, func(i, j int) bool { return out.Steps[i].ID < out.Steps[j].ID })
	return out
}

// StepFromMessage converts a step state to the JSON view.
func StepFromMessage(s *messages.StepState) Step {
	return Step{
		ID: s.GetStepId(), Status: s.GetStatus(), Attempts: s.GetAttempts(),
		StartedAt: optTime(s.GetStartedAt()), FinishedAt: optTime(s.GetFinishedAt()),
		Output: rawJSON(s.GetOutput()), Error: s.GetError(),
	}
}

// InstanceFromMessage converts a capacity descriptor to the JSON view.
func InstanceFromMessage(d *messages.CapacityDescriptor) Instance {
	md := d.GetMetadata()
	if md == nil {
		md = map[string]string{}
	}
	return Instance{
		RuntimeInstanceID: d.GetRuntimeInstanceId(), ControlPlaneID: d.GetControlPlaneId(), HostID: d.GetHostId(),
		ProviderName: d.GetProviderName(), TransportName: d.GetTransportName(), Endpoint: d.GetEndpoint(),
		Status: d.GetStatus(), WorkerCount: d.GetWorkerCount(), ActiveWorkerCount: d.GetActiveWorkerCount(),
		AvailableWorkerCount: d.GetAvailableWorkerCount(), MaxLocalWorkersPerExecution: d.GetMaxLocalWorkersPerExecution(),
		QueuedRunCount: d.GetQueuedRunCount(), RunningRunCount: d.GetRunningRunCount(), ActiveRunCount: d.GetActiveRunCount(),
		QueueCapacity: d.GetQueueCapacity(), MaxConcurrentRuns: d.GetMaxConcurrentRuns(),
		AvailableRunSlots: d.GetAvailableRunSlots(), IsQueuePaused: d.GetIsQueuePaused(), IsDraining: d.GetIsDraining(),
		CanAcceptRun: d.GetCanAcceptRun(), TenantID: d.GetTenantId(), TenantGroupID: d.GetTenantGroupId(),
		IsolationMode: d.GetIsolationMode(), PreferDedicatedCapacity: d.GetPreferDedicatedCapacity(),
		AllowSharedFallback: d.GetAllowSharedFallback(), RuntimeInstanceIDPrefix: d.GetRuntimeInstanceIdPrefix(),
		LastHeartbeatAt: unixTime(d.GetLastHeartbeatAt()), Metadata: md, NodeID: d.GetNodeId(),
	}
}

// TenantFromMessage converts tenant settings to the JSON view.
func TenantFromMessage(t *messages.TenantSettings) Tenant {
	return Tenant{
		TenantID: t.GetTenantId(), TenantGroupID: t.GetTenantGroupId(), IsolationMode: t.GetIsolationMode(),
		PreferDedicatedCapacity: t.GetPreferDedicatedCapacity(), AllowSharedFallback: t.GetAllowSharedFallback(),
		RuntimeInstanceIDPrefix: t.GetRuntimeInstanceIdPrefix(), MaxRuntimeInstances: t.GetMaxRuntimeInstances(),
		WorkerCountPerInstance: t.GetWorkerCountPerInstance(), MaxConcurrentRunsPerInstance: t.GetMaxConcurrentRunsPerInstance(),
		LocalQueueCapacity: t.GetLocalQueueCapacity(), MaxLocalWorkersPerExecution: t.GetMaxLocalWorkersPerExecution(),
		Suspended: t.GetSuspended(),
	}
}

// ToMessage converts the JSON view to tenant settings.
func (t Tenant) ToMessage() *messages.TenantSettings {
	return &messages.TenantSettings{
		TenantId: t.TenantID, TenantGroupId: t.TenantGroupID, IsolationMode: t.IsolationMode,
		PreferDedicatedCapacity: t.PreferDedicatedCapacity, AllowSharedFallback: t.AllowSharedFallback,
		RuntimeInstanceIdPrefix: t.RuntimeInstanceIDPrefix, MaxRuntimeInstances: t.MaxRuntimeInstances,
		WorkerCountPerInstance: t.WorkerCountPerInstance, MaxConcurrentRunsPerInstance: t.MaxConcurrentRunsPerInstance,
		LocalQueueCapacity: t.LocalQueueCapacity, MaxLocalWorkersPerExecution: t.MaxLocalWorkersPerExecution,
		Suspended: t.Suspended,
	}
}

// LedgerEntryFromMessage converts a ledger entry to the JSON view.
func LedgerEntryFromMessage(e *messages.LedgerEntry) LedgerEntry {
	return LedgerEntry{
		Seq: e.GetSeq(), At: unixTime(e.GetAt()), Kind: e.GetKind(), SharedRunID: e.GetSharedRunId(),
		TenantID: e.GetTenantId(), ExecutionID: e.GetExecutionId(), RuntimeInstanceID: e.GetRuntimeInstanceId(),
		StepID: e.GetStepId(), Attempt: e.GetAttempt(), Epoch: e.GetEpoch(), Reason: e.GetReason(),
		Data: rawJSON(e.GetData()),
	}
}

// PipelineFromMessage converts a stored pipeline version; withSource includes the document.
func PipelineFromMessage(p *messages.PipelineVersion, withSource bool) Pipeline {
	out := Pipeline{Key: p.GetKey(), Hash: p.GetHash(), CreatedAt: unixTime(p.GetCreatedAt())}
	if withSource {
		out.Source = string(p.GetSource())
	}
	return out
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

func (t *UsageTotals) add(ev UsageEvent) {
	switch ev.Kind {
	case "run":
		t.Runs++
	case "step":
		t.Steps++
	}
	t.DurationMS += ev.DurationMS
	t.Attempts += int64(ev.Attempts)
	t.PromptTokens += ev.PromptTokens
	t.CompletionTokens += ev.CompletionTokens
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

// UsageEventFromMessage converts a stored usage event.
func UsageEventFromMessage(e *messages.UsageEvent) UsageEvent {
	return UsageEvent{Kind: e.Kind, TenantID: e.TenantId, SharedRunID: e.SharedRunId, ExecutionID: e.ExecutionId,
		StepID: e.StepId, Handler: e.Handler, DurationMS: time.Duration(e.DurationNs).Milliseconds(), Attempts: e.Attempts,
		PromptTokens: e.PromptTokens, CompletionTokens: e.CompletionTokens, At: unixTime(e.At)}
}
