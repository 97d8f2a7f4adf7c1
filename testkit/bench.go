package testkit

import (
	"slices"
	"testing"
	"time"
)

// ReportLatency reports the 50th and 99th percentile and the maximum of lat on b, in the
// units of CONTRACT.md ("p50-ns", "p99-ns", "max-ns"). It sorts lat in place; an empty lat
// reports nothing. Call it from the benchmark's goroutine once the samples are complete.
func ReportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) }
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
}
