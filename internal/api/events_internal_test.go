package api

import (
	"slices"
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
)

func TestFollowing(t *testing.T) {
	seqs := func(es []*messages.LedgerEntry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.GetSeq())
		}
		return out
	}
	entries := func(seqs ...int64) []*messages.LedgerEntry {
		var out []*messages.LedgerEntry
		for _, s := range seqs {
			out = append(out, &messages.LedgerEntry{Seq: s})
		}
		return out
	}
	tests := []struct {
		name  string
		got   []*messages.LedgerEntry
		after int64
		want  []int64
		ok    bool
	}{
		{"none", nil, 3, nil, true},
		{"in order", entries(4, 5, 6), 3, []int64{4, 5, 6}, true},
		{"out of order", entries(5, 4, 6), 3, []int64{4, 5, 6}, true},
		{"some written already", entries(2, 3, 4), 3, []int64{4}, true},
		{"all written already", entries(1, 2), 3, nil, true},
		{"a gap", entries(4, 6), 3, nil, false},
		{"not the next one", entries(5, 6), 3, nil, false},
		{"an entry without seq", entries(4, 0), 3, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, ok := following(tt.got, tt.after)
			if ok != tt.ok || !slices.Equal(seqs(next), tt.want) {
				t.Fatalf("following(%v, %d) = %v, %v; want %v, %v", seqs(tt.got), tt.after, seqs(next), ok, tt.want, tt.ok)
			}
		})
	}
}

func TestStreamTimer_due(t *testing.T) {
	tests := []struct {
		name               string
		pollPast, beatPast bool
		wantPoll, wantBeat bool
	}{
		{"nothing due", false, false, false, false},
		{"poll due", true, false, true, false},
		{"heartbeat due", false, true, false, true},
		{"both due", true, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStreamTimer(time.Hour, 2*time.Hour)
			defer st.stop()
			past := time.Now().Add(-time.Second)
			if tt.pollPast {
				st.nextPoll = past
			}
			if tt.beatPast {
				st.nextBeat = past
			}
			before := time.Now()
			poll, beat := st.due()
			if poll != tt.wantPoll || beat != tt.wantBeat {
				t.Fatalf("due() = %v, %v; want %v, %v", poll, beat, tt.wantPoll, tt.wantBeat)
			}
			// A duty done is due again a whole period later; one not due keeps its time.
			if !st.nextPoll.After(before) || (tt.pollPast && st.nextPoll.Before(before.Add(time.Hour))) {
				t.Fatalf("next poll at %v, due() at %v", st.nextPoll, before)
			}
			if !st.nextBeat.After(before) || (tt.beatPast && st.nextBeat.Before(before.Add(2*time.Hour))) {
				t.Fatalf("next heartbeat at %v, due() at %v", st.nextBeat, before)
			}
		})
	}
}
