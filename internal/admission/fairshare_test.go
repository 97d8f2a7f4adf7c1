package admission

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestFairShare_Plan_rules(t *testing.T) {
	tests := []struct {
		name    string
		charged map[string]int // runs charged before the plan, by tenant (weight 1)
		backlog []Backlog
		n       int
		want    string // tenant ids of the plan, joined
	}{
		{"no backlog plans nothing", nil, nil, 4, ""},
		{"one tenant takes the batch", nil, []Backlog{{TenantID: "a", Pending: 9, Room: -1}}, 3, "aaa"},
		{"equal weights alternate", nil, []Backlog{{TenantID: "a", Pending: 9, Room: -1}, {TenantID: "b", Pending: 9, Room: -1}}, 4, "abab"},
		{"weights 1 and 3 interleave 1:3", nil, []Backlog{{TenantID: "a", Weight: 1, Pending: 9, Room: -1}, {TenantID: "b", Weight: 3, Pending: 9, Room: -1}}, 4, "bbab"},
		{"weight 0 counts as 1", nil, []Backlog{{TenantID: "a", Pending: 9, Room: -1}, {TenantID: "b", Weight: 1, Pending: 9, Room: -1}}, 2, "ab"},
		{"pending bounds a tenant", nil, []Backlog{{TenantID: "a", Pending: 1, Room: -1}, {TenantID: "b", Pending: 9, Room: -1}}, 4, "abbb"},
		{"concurrency room bounds a tenant", nil, []Backlog{{TenantID: "a", Pending: 9, Room: 1}, {TenantID: "b", Pending: 9, Room: -1}}, 4, "abbb"},
		{"a tenant at its quota gets one probe run", nil, []Backlog{{TenantID: "a", Pending: 9, Room: 0}, {TenantID: "b", Pending: 9, Room: -1}}, 4, "abbb"},
		{"serving a tenant alone earns it no debt", map[string]int{"a": 3}, []Backlog{{TenantID: "a", Pending: 9, Room: -1}, {TenantID: "b", Pending: 9, Room: -1}}, 4, "baba"},
		{"a tenant served while another waited lets it catch up", map[string]int{"a": 3, "b": 0}, []Backlog{{TenantID: "a", Pending: 9, Room: -1}, {TenantID: "b", Pending: 9, Room: -1}}, 4, "bbba"},
		{"a newcomer starts at virtual time, not zero", map[string]int{"a": 3, "b": 3}, []Backlog{{TenantID: "a", Pending: 9, Room: -1}, {TenantID: "c", Pending: 9, Room: -1}}, 4, "caca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f FairShare
			var busy []Backlog
			for id := range tt.charged {
				busy = append(busy, Backlog{TenantID: id, Pending: 1, Room: -1})
			}
			for id, n := range tt.charged {
				for range n {
					f.Plan(busy, 1) // the charged tenants were backlogged while served
					f.Charge(id, 1)
				}
			}
			if got := strings.Join(f.Plan(tt.backlog, tt.n), ""); got != tt.want {
				t.Fatalf("Plan = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFairShare_Plan_idleTenantForgotten checks that a tenant without backlog costs nothing:
// once the others pass its tag it is dropped, and coming back earns it no credit.
func TestFairShare_Plan_idleTenantForgotten(t *testing.T) {
	var f FairShare
	f.Charge("a", 1)
	f.Charge("b", 1)
	for range 5 {
		f.Plan([]Backlog{{TenantID: "b", Pending: 1, Room: -1}}, 1)
		f.Charge("b", 1)
	}
	f.Plan([]Backlog{{TenantID: "b", Pending: 1, Room: -1}}, 1)
	if f.Tenants() != 1 {
		t.Fatalf("remembers %d tenants, want only b", f.Tenants())
	}
	// a comes back: it starts at b's tag, so it alternates with b instead of taking 5 in a row.
	if got := strings.Join(f.Plan([]Backlog{{TenantID: "a", Pending: 9, Room: -1}, {TenantID: "b", Pending: 9, Room: -1}}, 4), ""); got != "abab" {
		t.Fatalf("Plan = %q, want abab", got)
	}
}

// TestFairShare_converges simulates a contended pool: each round a random number of slots
// frees, the plan's runs are tried in order and a random few of the first ones start (as
// parallel dispatches race). Shares must end within 2% of the weight shares.
func TestFairShare_converges(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 3))
	weights := map[string]int{"a": 1, "b": 3, "c": 2}
	var f FairShare
	got := map[string]int{}
	total := 0
	for range 5000 {
		backlog := []Backlog{{TenantID: "a", Weight: 1, Pending: 100, Room: -1}, {TenantID: "b", Weight: 3, Pending: 100, Room: -1}, {TenantID: "c", Weight: 2, Pending: 100, Room: -1}}
		plan := f.Plan(backlog, 32)
		free := rng.IntN(4)
		// The winners are drawn from the first 2*free entries of the plan.
		window := slices.Clone(plan[:min(len(plan), 2*free)])
		rng.Shuffle(len(window), func(i, j int) { window[i], window[j] = window[j], window[i] })
		for _, id := range window[:min(len(window), free)] {
			f.Charge(id, weights[id])
			got[id]++
			total++
		}
	}
	for id, w := range weights {
		share, want := float64(got[id])/float64(total), float64(w)/6
		if math.Abs(share-want) > 0.02 {
			t.Errorf("tenant %s share %.3f, want %.3f±0.02 (%v)", id, share, want, got)
		}
	}
}
