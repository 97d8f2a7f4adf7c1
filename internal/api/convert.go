package api

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Conversions between the stored messages and their JSON views (package httpapi).

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

// runFromMessage converts a shared run and its step states (either may be nil steps) to the
// JSON view. Steps are sorted by id.
func runFromMessage(r *messages.SharedRun, steps []*messages.StepState) httpapi.Run {
	out := httpapi.Run{
		SharedRunID: r.GetSharedRunId(), TenantID: r.GetTenantId(), TenantGroupID: r.GetTenantGroupId(),
		Pipeline: r.GetPipeline(), PipelineHash: r.GetPipelineHash(), Status: r.GetStatus(),
		AssignedRuntimeInstanceID: r.GetAssignedRuntimeInstanceId(), PumpRuntimeInstanceID: r.GetPumpRuntimeInstanceId(),
		ExecutionID: r.GetExecutionId(), LocalRunID: r.GetLocalRunId(), Attempts: r.GetAttempts(),
		FailureReason: r.GetFailureReason(), Input: rawJSON(r.GetInput()), Output: rawJSON(r.GetOutput()),
		CreatedAt: unixTime(r.GetCreatedAt()), UpdatedAt: unixTime(r.GetUpdatedAt()),
		CorrelationID: r.GetCorrelationId(), IdempotencyKey: r.GetIdempotencyKey(), SessionID: r.GetSessionId(),
		Steps: make([]httpapi.Step, 0, len(steps)),
	}
	if r.GetStatus() == messages.RunQueued { // the store keeps why it waits where a failure's reason goes
		out.WaitingReason, out.FailureReason = r.GetFailureReason(), ""
	}
	for _, s := range steps {
		out.Steps = append(out.Steps, stepFromMessage(s))
	}
	sort.Slice(out.Steps, func(i, j int) bool { return out.Steps[i].ID < out.Steps[j].ID })
	return out
}

// stepFromMessage converts a step state to the JSON view.
func stepFromMessage(s *messages.StepState) httpapi.Step {
	return httpapi.Step{
		ID: s.GetStepId(), Status: s.GetStatus(), Attempts: s.GetAttempts(),
		StartedAt: optTime(s.GetStartedAt()), FinishedAt: optTime(s.GetFinishedAt()),
		Output: rawJSON(s.GetOutput()), Error: s.GetError(),
	}
}

// instanceFromMessage converts a capacity descriptor to the JSON view.
func instanceFromMessage(d *messages.CapacityDescriptor) httpapi.Instance {
	md := d.GetMetadata()
	if md == nil {
		md = map[string]string{}
	}
	return httpapi.Instance{
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

// tenantFromMessage converts tenant settings to the JSON view.
func tenantFromMessage(t *messages.TenantSettings) httpapi.Tenant {
	return httpapi.Tenant{
		TenantID: t.GetTenantId(), TenantGroupID: t.GetTenantGroupId(), IsolationMode: t.GetIsolationMode(),
		PreferDedicatedCapacity: t.GetPreferDedicatedCapacity(), AllowSharedFallback: t.GetAllowSharedFallback(),
		RuntimeInstanceIDPrefix: t.GetRuntimeInstanceIdPrefix(), MaxRuntimeInstances: t.GetMaxRuntimeInstances(),
		WorkerCountPerInstance: t.GetWorkerCountPerInstance(), MaxConcurrentRunsPerInstance: t.GetMaxConcurrentRunsPerInstance(),
		LocalQueueCapacity: t.GetLocalQueueCapacity(), MaxLocalWorkersPerExecution: t.GetMaxLocalWorkersPerExecution(),
		Suspended: t.GetSuspended(), Weight: t.GetWeight(), MaxConcurrentRuns: t.GetMaxConcurrentRuns(),
		MaxQueuedRuns: t.GetMaxQueuedRuns(), RunsPerSecond: t.GetRunsPerSecond(), RunsBurst: t.GetRunsBurst(),
	}
}

// tenantToMessage converts the JSON view to tenant settings.
func tenantToMessage(t httpapi.Tenant) *messages.TenantSettings {
	return &messages.TenantSettings{
		TenantId: t.TenantID, TenantGroupId: t.TenantGroupID, IsolationMode: t.IsolationMode,
		PreferDedicatedCapacity: t.PreferDedicatedCapacity, AllowSharedFallback: t.AllowSharedFallback,
		RuntimeInstanceIdPrefix: t.RuntimeInstanceIDPrefix, MaxRuntimeInstances: t.MaxRuntimeInstances,
		WorkerCountPerInstance: t.WorkerCountPerInstance, MaxConcurrentRunsPerInstance: t.MaxConcurrentRunsPerInstance,
		LocalQueueCapacity: t.LocalQueueCapacity, MaxLocalWorkersPerExecution: t.MaxLocalWorkersPerExecution,
		Suspended: t.Suspended, Weight: t.Weight, MaxConcurrentRuns: t.MaxConcurrentRuns, MaxQueuedRuns: t.MaxQueuedRuns,
		RunsPerSecond: t.RunsPerSecond, RunsBurst: t.RunsBurst,
	}
}

// ledgerEntryFromMessage converts a ledger entry to the JSON view.
func ledgerEntryFromMessage(e *messages.LedgerEntry) httpapi.LedgerEntry {
	return httpapi.LedgerEntry{
		Seq: e.GetSeq(), At: unixTime(e.GetAt()), Kind: e.GetKind(), SharedRunID: e.GetSharedRunId(),
		TenantID: e.GetTenantId(), ExecutionID: e.GetExecutionId(), RuntimeInstanceID: e.GetRuntimeInstanceId(),
		StepID: e.GetStepId(), Attempt: e.GetAttempt(), Epoch: e.GetEpoch(), Reason: e.GetReason(),
		Data: rawJSON(e.GetData()),
	}
}

// pipelineFromMessage converts a stored pipeline version; withSource includes the document.
func pipelineFromMessage(p *messages.PipelineVersion, withSource bool) httpapi.Pipeline {
	out := httpapi.Pipeline{Key: p.GetKey(), Hash: p.GetHash(), CreatedAt: unixTime(p.GetCreatedAt())}
	if withSource {
		out.Source = string(p.GetSource())
	}
	return out
}

// usageEventFromMessage converts a stored usage event.
func usageEventFromMessage(e *messages.UsageEvent) httpapi.UsageEvent {
	return httpapi.UsageEvent{Kind: e.Kind, TenantID: e.TenantId, SharedRunID: e.SharedRunId, ExecutionID: e.ExecutionId,
		StepID: e.StepId, Handler: e.Handler, DurationMS: time.Duration(e.DurationNs).Milliseconds(), Attempts: e.Attempts,
		PromptTokens: e.PromptTokens, CompletionTokens: e.CompletionTokens, At: unixTime(e.At)}
}

// addUsage adds one usage event to a report's totals: runs and steps count events of each
// kind; the other fields add up.
func addUsage(t *httpapi.UsageTotals, ev httpapi.UsageEvent) {
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
