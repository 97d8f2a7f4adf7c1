package controlplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/controlplane"
)

func TestJudgeOrphan(t *testing.T) {
	rules := controlplane.OrphanRules{TTL: 30 * time.Second, Stale: 2500 * time.Millisecond, Confirm: 1500 * time.Millisecond}
	now := time.Unix(1_000_000, 0)
	refreshed := func(ago time.Duration) controlplane.Hold {
		return controlplane.Hold{Until: now.Add(-ago).Add(rules.TTL)}
	}
	none := controlplane.Hold{}
	cases := []struct {
		name      string
		hold      controlplane.Hold
		prev      *controlplane.Suspicion
		want      controlplane.OrphanVerdict
		wantSince time.Time // zero: no suspicion kept
	}{
		{name: "refreshed a heartbeat ago", hold: refreshed(time.Second), want: controlplane.OrphanHeld},
		{name: "refreshed just within the stale bound", hold: refreshed(rules.Stale), want: controlplane.OrphanHeld},
		{name: "a fresh hold clears an old suspicion", hold: refreshed(0),
			prev: &controlplane.Suspicion{Since: now.Add(-time.Minute), Hold: refreshed(time.Minute)}, want: controlplane.OrphanHeld},
		{name: "stale, first seen", hold: refreshed(3 * time.Second), want: controlplane.OrphanSuspect, wantSince: now},
		{name: "no hold, first seen", hold: none, want: controlplane.OrphanSuspect, wantSince: now},
		{name: "stale, unchanged, not confirmed yet", hold: refreshed(4 * time.Second),
			prev: &controlplane.Suspicion{Since: now.Add(-time.Second), Hold: refreshed(4 * time.Second)},
			want: controlplane.OrphanSuspect, wantSince: now.Add(-time.Second)},
		{name: "stale, unchanged, confirmed", hold: refreshed(5 * time.Second),
			prev: &controlplane.Suspicion{Since: now.Add(-rules.Confirm), Hold: refreshed(5 * time.Second)}, want: controlplane.OrphanLost,
			wantSince: now.Add(-rules.Confirm)},
		{name: "no hold, confirmed", hold: none, prev: &controlplane.Suspicion{Since: now.Add(-2 * time.Second), Hold: none},
			want: controlplane.OrphanLost, wantSince: now.Add(-2 * time.Second)},
		{name: "stale but refreshed since first seen: suspicion starts over", hold: refreshed(3 * time.Second),
			prev: &controlplane.Suspicion{Since: now.Add(-10 * time.Second), Hold: refreshed(20 * time.Second)},
			want: controlplane.OrphanSuspect, wantSince: now},
		{name: "clock went back: suspicion starts over", hold: none, prev: &controlplane.Suspicion{Since: now.Add(time.Minute), Hold: none},
			want: controlplane.OrphanSuspect, wantSince: now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, s := controlplane.JudgeOrphan(now, tc.hold, tc.prev, rules)
			require.Equal(t, tc.want, got, "verdict %s", got)
			if tc.wantSince.IsZero() {
				require.Nil(t, s)
				return
			}
			require.NotNil(t, s)
			require.True(t, tc.wantSince.Equal(s.Since), "since %s, want %s", s.Since, tc.wantSince)
			require.True(t, tc.hold.Until.Equal(s.Hold.Until))
		})
	}
}
