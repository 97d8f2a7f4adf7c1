// Package metrics holds a dair node's Prometheus collectors: runs by status, step durations,
// shared-queue depth, per-instance capacity, admission decisions, provider operations and
// fenced executions. Each node registers them on its own registry, so several nodes can live in
// one process.
//
// # Usage
//
//	m := metrics.New()
//	m.Admission("assign_to_instance", "eligible")
//	http.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
//
// Every method is nil-safe (a nil *Metrics records nothing) and goroutine-safe.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dairuntime/dair/messages"
)

// Metrics are a node's Prometheus collectors, registered on Registry.
type Metrics struct {
	// Registry holds the collectors (and the Go and process collectors).
	Registry      *prometheus.Registry
	runs          *prometheus.CounterVec
	stepDuration  *prometheus.HistogramVec
	queueDepth    *prometheus.GaugeVec
	instanceGauge *prometheus.GaugeVec
	admissions    *prometheus.CounterVec
	providerOps   *prometheus.CounterVec
	fencedTotal   prometheus.Counter
}

// New creates the collectors on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dair_runs_total",
			Help: "Runs that reached a status, by status."}, []string{"status"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dair_step_duration_seconds",
			Help: "Step attempt duration by outcome.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"outcome"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dair_shared_queue_depth",
			Help: "Shared queue items by state (pending, claimed)."}, []string{"state"}),
		instanceGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dair_instance_capacity",
			Help: "Runtime instance capacity fields by instance and field."}, []string{"runtime_instance_id", "field"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dair_admission_decisions_total",
			Help: "Admission decisions by decision and reason."}, []string{"decision", "reason"}),
		providerOps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dair_provider_operations_total",
			Help: "Provider operations by provider, op and outcome."}, []string{"provider", "op", "outcome", "reason"}),
		fencedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "dair_executions_fenced_total",
			Help: "Executions stopped because their fencing epoch went stale."}),
	}
	m.Registry.MustRegister(m.runs, m.stepDuration, m.queueDepth, m.instanceGauge, m.admissions, m.providerOps, m.fencedTotal,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// RunFinished counts a run that reached status.
func (m *Metrics) RunFinished(status string) {
	if m != nil {
		m.runs.WithLabelValues(status).Inc()
	}
}

// ObserveStep records the duration of one step attempt and whether it succeeded.
func (m *Metrics) ObserveStep(ok bool, d time.Duration) {
	if m == nil {
		return
	}
	outcome := "succeeded"
	if !ok {
		outcome = "failed"
	}
	m.stepDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// Fenced counts an execution stopped by a stale fencing epoch.
func (m *Metrics) Fenced() {
	if m != nil {
		m.fencedTotal.Inc()
	}
}

// Admission counts an admission decision and its reason.
func (m *Metrics) Admission(decision, reason string) {
	if m != nil {
		m.admissions.WithLabelValues(decision, reason).Inc()
	}
}

// Provider counts a provider operation by its structured result (nil is ignored).
func (m *Metrics) Provider(r *messages.ProviderResult) {
	if m == nil || r == nil {
		return
	}
	outcome := "ok"
	if !r.Ok {
		outcome = "failed"
	}
	m.providerOps.WithLabelValues(r.Provider, r.Op, outcome, r.Reason).Inc()
}

// Queue sets the shared-queue depth gauges.
func (m *Metrics) Queue(pending, claimed int64) {
	if m != nil {
		m.queueDepth.WithLabelValues("pending").Set(float64(pending))
		m.queueDepth.WithLabelValues("claimed").Set(float64(claimed))
	}
}

// Capacity sets the per-instance capacity gauges from a published descriptor.
func (m *Metrics) Capacity(d *messages.CapacityDescriptor) {
	if m == nil {
		return
	}
	id := d.RuntimeInstanceId
	accept := 0.0
	if d.CanAcceptRun {
		accept = 1
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"max_concurrent_runs", float64(d.MaxConcurrentRuns)},
		{"available_run_slots", float64(d.AvailableRunSlots)},
		{"worker_count", float64(d.WorkerCount)},
		{"available_worker_count", float64(d.AvailableWorkerCount)},
		{"running_run_count", float64(d.RunningRunCount)},
		{"queued_run_count", float64(d.QueuedRunCount)},
		{"queue_capacity", float64(d.QueueCapacity)},
		{"can_accept_run", accept},
	} {
		m.instanceGauge.WithLabelValues(id, f.name).Set(f.v)
	}
}

// DropInstance removes the capacity gauges of an instance that is gone.
func (m *Metrics) DropInstance(id string) {
	if m != nil {
		m.instanceGauge.DeletePartialMatch(prometheus.Labels{"runtime_instance_id": id})
	}
}
