package actors

import (
	"time"

	"github.com/dairuntime/dair/internal/metrics"
)

// Metrics are a node's Prometheus collectors (see internal/metrics).
type Metrics = metrics.Metrics

// NewMetrics creates the collectors on a fresh registry.
func NewMetrics() *Metrics { return metrics.New() }

// nodeMetrics is the node's Metrics with the short names the execution actor records with.
// Its methods are nil-safe and goroutine-safe.
type nodeMetrics struct{ *metrics.Metrics }

func (m nodeMetrics) runFinished(status string)            { m.RunFinished(status) }
func (m nodeMetrics) observeStep(ok bool, d time.Duration) { m.ObserveStep(ok, d) }
func (m nodeMetrics) fenced()                              { m.Fenced() }
