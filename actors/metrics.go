package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dairuntime/dair/messages"
)

// Metrics are a node's Prometheus collectors, registered on the node's own registry (so
// several nodes can live in one process). All methods are nil-safe and goroutine-safe.
type Metrics struct {
	Registry      *prometheus.Registry
	runs          *prometheus.CounterVec
	stepDuration  *prometheus.HistogramVec
	queueDepth    *prometheus.GaugeVec
	instanceGauge *prometheus.GaugeVec
	admissions    *prometheus.CounterVec
	providerOps   *prometheus.CounterVec
	fencedTotal   prometheus.Counter
}

// NewMetrics creates the collectors on a fresh registry.
func NewMetrics() *Metrics {
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

func (m *Metrics) runFinished(status string) {
	if m != nil {
		m.runs.WithLabelValues(status).Inc()
	}
}

func (m *Metrics) runStatus(status string) {
	if m != nil {
		m.runs.WithLabelValues(status).Inc()
	}
}

func (m *Metrics) observeStep(ok bool, d time.Duration) {
	if m == nil {
		return
	}
	outcome := "succeeded"
	if !ok {
		outcome = "failed"
	}
	m.stepDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

func (m *Metrics) fenced() {
	if m != nil {
		m.fencedTotal.Inc()
	}
}

func (m *Metrics) admission(decision, reason string) {
	if m != nil {
		m.admissions.WithLabelValues(decision, reason).Inc()
	}
}

func (m *Metrics) provider(r *messages.ProviderResult) {
	if m == nil || r == nil {
		return
	}
	outcome := "ok"
	if !r.Ok {
		outcome = "failed"
	}
	m.providerOps.WithLabelValues(r.Provider, r.Op, outcome, r.Reason).Inc()
}

func (m *Metrics) queue(pending, claimed int64) {
	if m != nil {
		m.queueDepth.WithLabelValues("pending").Set(float64(pending))
		m.queueDepth.WithLabelValues("claimed").Set(float64(claimed))
	}
}

// capacity sets the per-instance capacity gauges from a published descriptor.
func (m *Metrics) capacity(d *messages.CapacityDescriptor) {
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

func (m *Metrics) dropInstance(id string) {
	if m != nil {
		m.instanceGauge.DeletePartialMatch(prometheus.Labels{"runtime_instance_id": id})
	}
}
