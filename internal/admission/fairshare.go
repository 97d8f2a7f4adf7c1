package admission

import "math"

// Backlog is one tenant's part of the shared queue as the fair-share scheduler sees it.
type Backlog struct {
	TenantID string
	// Weight is the tenant's fair-share weight; below 1 means 1.
	Weight int
	// Pending is how many of the tenant's runs wait in the shared queue.
	Pending int
	// Room is how many more runs the tenant may start now (what its concurrency quota leaves);
	// a negative Room means no quota. A tenant with no room still gets one probe run per plan,
	// so that its head run is looked at and records why it waits.
	Room int
}

// take is how many of b's runs a plan may hold.
func (b Backlog) take() int {
	if b.Room < 0 {
		return b.Pending
	}
	return min(b.Pending, max(b.Room, 1))
}

func (b Backlog) cost() float64 { return 1 / float64(max(b.Weight, 1)) }

// FairShare is start-time fair queuing over per-tenant queues: each tenant has a virtual finish
// tag F that grows by 1/weight for each of its runs dispatched on shared capacity (Charge), and
// the runs of the backlogged tenant whose next finish tag (max(F, V) + 1/weight) is the
// smallest go first (Plan). V, the virtual time, is the smallest tag among the backlogged
// tenants: a tenant that starts waiting begins at V, so idle time earns no credit, and a tenant
// with no backlog is not in any plan and costs nothing. Over a contended window each
// backlogged tenant's share of the dispatched runs converges to weight / Σ weights.
//
// FairShare is pure (no I/O, no clock) and deterministic: ties break by tenant id. It is not
// safe for concurrent use; the zero value is ready.
type FairShare struct {
	// finish is F per tenant; tenants at or behind V are dropped.
	finish map[string]float64
	// v is the virtual time of the last plan.
	v float64
}

// Plan returns the order in which to take up to n runs from the tenants of backlog: a tenant
// id per run, interleaved by weight (3 of a weight-3 tenant for each of a weight-1 tenant),
// never more runs of a tenant than its Pending and Room allow. It advances the virtual time to
// the smallest tag of the backlogged tenants and forgets tenants without backlog that are
// behind it. The caller owns the returned slice.
func (f *FairShare) Plan(backlog []Backlog, n int) []string {
	if f.finish == nil {
		f.finish = map[string]float64{}
	}
	waiting := make(map[string]bool, len(backlog))
	v := math.Inf(1)
	for _, b := range backlog {
		if b.Pending <= 0 {
			continue
		}
		waiting[b.TenantID] = true
		v = min(v, max(f.finish[b.TenantID], f.v))
	}
	if !math.IsInf(v, 1) {
		f.v = v
	}
	for id, fin := range f.finish {
		if !waiting[id] && fin <= f.v {
			delete(f.finish, id)
		}
	}
	return f.interleave(backlog, n)
}

// interleave simulates n picks by smallest next finish tag.
func (f *FairShare) interleave(backlog []Backlog, n int) []string {
	tags := make([]float64, len(backlog))
	left := make([]int, len(backlog))
	for i, b := range backlog {
		tags[i] = max(f.finish[b.TenantID], f.v)
		left[i] = b.take()
	}
	var out []string
	for len(out) < n {
		best := -1
		for i, b := range backlog {
			if left[i] <= 0 {
				continue
			}
			if best < 0 || less(tags[i]+b.cost(), b.TenantID, tags[best]+backlog[best].cost(), backlog[best].TenantID) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out = append(out, backlog[best].TenantID)
		tags[best] += backlog[best].cost()
		left[best]--
	}
	return out
}

func less(a float64, aID string, b float64, bID string) bool {
	if a != b {
		return a < b
	}
	return aID < bID
}

// Charge accounts one run of tenantID (of the given weight; below 1 means 1) dispatched on
// shared capacity: its finish tag becomes max(F, V) + 1/weight.
func (f *FairShare) Charge(tenantID string, weight int) {
	if f.finish == nil {
		f.finish = map[string]float64{}
	}
	f.finish[tenantID] = max(f.finish[tenantID], f.v) + 1/float64(max(weight, 1))
}

// Tenants returns how many tenants FairShare remembers (for tests and metrics).
func (f *FairShare) Tenants() int { return len(f.finish) }
