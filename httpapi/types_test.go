package httpapi_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dairuntime/dair/httpapi"
)

// jsonNames returns the JSON field names of struct value v.
func jsonNames(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}

// TestTypes_JSON_contractNames checks that every field name CONTRACT.md promises is present
// on its wire type. Renaming or dropping one breaks users; adding fields is fine.
func TestTypes_JSON_contractNames(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"SubmitRequest", httpapi.SubmitRequest{}, "pipeline tenant_id input correlation_id idempotency_key"},
		{"SubmitResponse", httpapi.SubmitResponse{}, "shared_run_id status"},
		{"Run", httpapi.Run{}, "shared_run_id tenant_id pipeline pipeline_hash status assigned_runtime_instance_id " +
			"pump_runtime_instance_id execution_id local_run_id attempts failure_reason input output " +
			"created_at updated_at steps"},
		{"Step", httpapi.Step{}, "id status attempts started_at finished_at output error"},
		{"RunList", httpapi.RunList{}, "runs"},
		{"Instance", httpapi.Instance{}, "runtime_instance_id control_plane_id host_id provider_name transport_name " +
			"endpoint status worker_count active_worker_count available_worker_count " +
			"max_local_workers_per_execution queued_run_count running_run_count active_run_count queue_capacity " +
			"max_concurrent_runs available_run_slots is_queue_paused is_draining can_accept_run tenant_id " +
			"tenant_group_id isolation_mode prefer_dedicated_capacity allow_shared_fallback " +
			"runtime_instance_id_prefix last_heartbeat_at metadata"},
		{"InstanceList", httpapi.InstanceList{}, "instances"},
		{"Tenant", httpapi.Tenant{}, "tenant_id tenant_group_id isolation_mode prefer_dedicated_capacity " +
			"allow_shared_fallback runtime_instance_id_prefix max_runtime_instances worker_count_per_instance " +
			"max_concurrent_runs_per_instance local_queue_capacity suspended"},
		{"TenantList", httpapi.TenantList{}, "tenants"},
		{"LedgerEntry", httpapi.LedgerEntry{}, "seq at kind shared_run_id execution_id runtime_instance_id step_id " +
			"attempt epoch reason data"},
		{"Ledger", httpapi.Ledger{}, "execution_id entries"},
		{"Span", httpapi.Span{}, "name kind start end attributes"},
		{"Trace", httpapi.Trace{}, "execution_id spans"},
		{"Divergence", httpapi.Divergence{}, "step_id reason"},
		{"Replay", httpapi.Replay{}, "execution_id diverged divergences"},
		{"AgentList", httpapi.AgentList{}, "agents"},
		{"AgentSendRequest", httpapi.AgentSendRequest{}, "tenant_id message timeout"},
		{"AgentSendResponse", httpapi.AgentSendResponse{}, "outcome response reason"},
		{"AgentPublishRequest", httpapi.AgentPublishRequest{}, "tenant_id message"},
		{"AgentPublishResponse", httpapi.AgentPublishResponse{}, "deliveries"},
		{"PipelineList", httpapi.PipelineList{}, "pipelines"},
		{"ErrorBody", httpapi.ErrorBody{}, "error"},
		{"ErrorDetail", httpapi.ErrorDetail{}, "code message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := jsonNames(tt.v)
			for _, f := range strings.Fields(tt.want) {
				if !have[f] {
					t.Errorf("%s has no JSON field %q", tt.name, f)
				}
			}
		})
	}
}
