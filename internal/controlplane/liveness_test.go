package controlplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
)

func TestJudgeMember(t *testing.T) {
	rules := controlplane.LivenessRules{TTL: time.Second, Interval: 250 * time.Millisecond}
	now := time.Unix(1_000_000, 0)
	healthy := controlplane.LivenessObservation{Now: now, HealthySince: now.Add(-time.Minute), RenewedAt: now.Add(-100 * time.Millisecond)}
	with := func(f func(*controlplane.LivenessObservation)) controlplane.LivenessObservation {
		o := healthy
		f(&o)
		return o
	}
	seen := controlplane.MemberLiveness{SeenAlive: true}
	cases := []struct {
		name     string
		prev     controlplane.MemberLiveness
		obs      controlplane.LivenessObservation
		want     controlplane.LivenessVerdict
		wantSeen bool
	}{
		{name: "lease held: alive, and now seen alive", obs: healthy, want: controlplane.MemberAlive, wantSeen: true},
		{name: "lease held, seen before", prev: seen, obs: healthy, want: controlplane.MemberAlive, wantSeen: true},
		{name: "lease held even while this node's store view is bad", prev: seen,
			obs: with(func(o *controlplane.LivenessObservation) { o.HealthySince = time.Time{} }), want: controlplane.MemberAlive, wantSeen: true},
		{name: "lease lapsed, this node healthy for a TTL: lost", prev: seen,
			obs: with(func(o *controlplane.LivenessObservation) { o.LeaseFree = true }), want: controlplane.MemberLapsed, wantSeen: true},
		{name: "endpoint refuses: crashed, whatever the lease", prev: seen,
			obs: with(func(o *controlplane.LivenessObservation) { o.Refused = true }), want: controlplane.MemberCrashed, wantSeen: true},
		{name: "endpoint refuses while this node's store view is bad: still crashed", prev: seen,
			obs: with(func(o *controlplane.LivenessObservation) {
				o.Refused, o.LeaseFree, o.HealthySince = true, true, time.Time{}
			}),
			want: controlplane.MemberCrashed, wantSeen: true},
		{name: "never seen alive, lease free: not judged (joining, or no liveness)",
			obs: with(func(o *controlplane.LivenessObservation) { o.LeaseFree = true }), want: controlplane.MemberUnknown},
		{name: "never seen alive, endpoint refuses: not judged (not listening yet)",
			obs: with(func(o *controlplane.LivenessObservation) { o.Refused, o.LeaseFree = true, true }), want: controlplane.MemberUnknown},
		{name: "lease lapsed but this node's last renewal failed (store outage)", prev: seen,
			obs:  with(func(o *controlplane.LivenessObservation) { o.LeaseFree, o.HealthySince = true, time.Time{} }),
			want: controlplane.MemberUnknown, wantSeen: true},
		{name: "lease lapsed, this node healthy again for less than a TTL (peers still catching up)", prev: seen,
			obs: with(func(o *controlplane.LivenessObservation) {
				o.LeaseFree, o.HealthySince = true, now.Add(-900*time.Millisecond)
			}),
			want: controlplane.MemberUnknown, wantSeen: true},
		{name: "lease lapsed, this node healthy exactly a TTL", prev: seen,
			obs:  with(func(o *controlplane.LivenessObservation) { o.LeaseFree, o.HealthySince = true, now.Add(-rules.TTL) }),
			want: controlplane.MemberLapsed, wantSeen: true},
		{name: "lease lapsed, but this node's own renewal is overdue (it stalled)", prev: seen,
			obs: with(func(o *controlplane.LivenessObservation) {
				o.LeaseFree, o.RenewedAt = true, now.Add(-600*time.Millisecond)
			}),
			want: controlplane.MemberUnknown, wantSeen: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, keep := controlplane.JudgeMember(tc.prev, tc.obs, rules)
			require.Equal(t, tc.want, got, "verdict %s", got)
			require.Equal(t, tc.wantSeen, keep.SeenAlive)
			require.Equal(t, tc.want == controlplane.MemberCrashed || tc.want == controlplane.MemberLapsed, got.Lost())
		})
	}
}

func TestNextHealthySince(t *testing.T) {
	rules := controlplane.LivenessRules{TTL: time.Second, Interval: 250 * time.Millisecond}
	now := time.Unix(1_000_000, 0)
	since := now.Add(-time.Minute)
	cases := []struct {
		name        string
		since, last time.Time
		ok          bool
		want        time.Time
	}{
		{name: "first renewal", ok: true, want: now},
		{name: "on time: unchanged", since: since, last: now.Add(-250 * time.Millisecond), ok: true, want: since},
		{name: "failed: starts over", since: since, last: now.Add(-250 * time.Millisecond), ok: false},
		{name: "first success after a failure", last: now.Add(-3 * time.Second), ok: true, want: now},
		{name: "late by a TTL (this node stalled): starts over", since: since, last: now.Add(-rules.TTL), ok: true, want: now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := controlplane.NextHealthySince(tc.since, tc.last, now, tc.ok, rules)
			require.True(t, tc.want.Equal(got), "got %s, want %s", got, tc.want)
		})
	}
}

func TestNextLivenessCheck(t *testing.T) {
	rules := controlplane.LivenessRules{TTL: time.Second, Interval: 250 * time.Millisecond}
	now := time.Unix(1_000_000, 0)
	slack := controlplane.LivenessCheckSlack
	at := func(d time.Duration) time.Time { return now.Add(d) }
	cases := []struct {
		name   string
		untils []time.Time
		want   time.Time
	}{
		{name: "no peers: one interval later", want: at(rules.Interval)},
		{name: "peers renewing: their leases outlast the interval", untils: []time.Time{at(900 * time.Millisecond), at(time.Second)},
			want: at(rules.Interval)},
		{name: "free or unknown leases do not count", untils: []time.Time{{}, {}}, want: at(rules.Interval)},
		{name: "a lease due within the interval: just after it lapses", untils: []time.Time{at(time.Second), at(100 * time.Millisecond)},
			want: at(100*time.Millisecond + slack)},
		{name: "the first of two due leases", untils: []time.Time{at(200 * time.Millisecond), at(50 * time.Millisecond)},
			want: at(50*time.Millisecond + slack)},
		{name: "a lease due right at the interval's end: the interval", untils: []time.Time{at(rules.Interval - slack)},
			want: at(rules.Interval)},
		{name: "a lease that lapsed since it was read: at once (the slack)", untils: []time.Time{at(-time.Millisecond)},
			want: at(slack)},
		{name: "a lease long past: never sooner than the slack", untils: []time.Time{at(-time.Hour)}, want: at(slack)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, controlplane.NextLivenessCheck(now, tc.untils, rules))
		})
	}
}
