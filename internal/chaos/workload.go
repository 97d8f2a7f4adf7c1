package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// workload is what the harness runs: four tenants (dedicated, hybrid and two shared) and one
// multi-step pipeline whose http steps call the counting server and take time.
type workload struct {
	prefix   string
	pipeline string
	source   string
	tenants  []httpapi.Tenant
}

// newWorkload names the tenants and the pipeline after prefix (unique per invocation, so a
// shared --store keeps runs of different invocations apart).
func newWorkload(prefix, counterURL string) *workload {
	w := &workload{prefix: prefix, pipeline: prefix + "-flow"}
	w.source = flowPipeline(w.pipeline, counterURL)
	// Capacity is sized so the runs do not queue behind each other on a loaded 2-core machine:
	// a fault's recovery time is then the fault's, not a queue's.
	w.tenants = []httpapi.Tenant{
		{TenantID: prefix + "-dedicated", IsolationMode: messages.IsolationDedicated, PreferDedicatedCapacity: true,
			MaxRuntimeInstances: 2, WorkerCountPerInstance: 16, MaxConcurrentRunsPerInstance: 8, LocalQueueCapacity: 500},
		{TenantID: prefix + "-hybrid", IsolationMode: messages.IsolationHybrid, PreferDedicatedCapacity: true,
			AllowSharedFallback: true, MaxRuntimeInstances: 1, WorkerCountPerInstance: 10, MaxConcurrentRunsPerInstance: 5,
			LocalQueueCapacity: 500},
		sharedTenant(prefix + "-shared-a"),
		sharedTenant(prefix + "-shared-b"),
	}
	return w
}

// sharedTenant is a shared tenant whose settings let the shared pool grow to three instances
// of ten runs.
func sharedTenant(id string) httpapi.Tenant {
	return httpapi.Tenant{TenantID: id, IsolationMode: messages.IsolationShared, MaxRuntimeInstances: 3,
		WorkerCountPerInstance: 20, MaxConcurrentRunsPerInstance: 10, LocalQueueCapacity: 500}
}

// flowPipeline is the workload's DAG, about 4 s on its critical path: fetch → left → think →
// join → done, with right and audit beside it. The http steps call the counting server, which
// answers after the given delay; think sleeps; done echoes.
func flowPipeline(key, url string) string {
	step := func(id, needs string, ms int) string {
		s := fmt.Sprintf("  - id: %s\n    uses: http\n    with: {url: %q}\n    retry: {max_attempts: 6, backoff: 200ms}\n",
			id, fmt.Sprintf("%s/step?ms=%d", url, ms))
		if needs != "" {
			s += "    needs: [" + needs + "]\n"
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "key: %s\nsteps:\n", key)
	b.WriteString(step("fetch", "", 600))
	b.WriteString(step("left", "fetch", 1000))
	b.WriteString(step("right", "fetch", 700))
	b.WriteString("  - id: think\n    uses: sleep\n    needs: [left]\n    with: {duration: 800ms}\n")
	b.WriteString(step("audit", "right", 900))
	b.WriteString(step("join", "think, audit", 600))
	b.WriteString("  - id: done\n    uses: echo\n    needs: [join]\n    with: {value: \"run {{ .input.n }} done\"}\n")
	return b.String()
}

// tenant returns the tenant of the i-th run: the tenants take turns.
func (w *workload) tenant(i int) string { return w.tenants[i%len(w.tenants)].TenantID }

// tenantIDs returns the workload's tenant ids.
func (w *workload) tenantIDs() []string {
	ids := make([]string, len(w.tenants))
	for i, t := range w.tenants {
		ids[i] = t.TenantID
	}
	return ids
}

// setup puts the tenants and the pipeline through c. It blocks on HTTP.
func (w *workload) setup(ctx context.Context, c *client.Client) error {
	for _, t := range w.tenants {
		if _, err := c.PutTenant(ctx, t); err != nil {
			return fmt.Errorf("put tenant %s: %w", t.TenantID, err)
		}
	}
	if _, err := c.PutPipeline(ctx, w.pipeline, []byte(w.source)); err != nil {
		return fmt.Errorf("put pipeline %s: %w", w.pipeline, err)
	}
	return nil
}

// submitRequest is the i-th run's submission; its idempotency key makes a retried submit
// (after a timeout or a 503) return the same run.
func (w *workload) submitRequest(i int) httpapi.SubmitRequest {
	return httpapi.SubmitRequest{Pipeline: w.pipeline, TenantID: w.tenant(i), Input: []byte(fmt.Sprintf(`{"n":%d}`, i)),
		IdempotencyKey: fmt.Sprintf("%s-run-%d", w.prefix, i)}
}
