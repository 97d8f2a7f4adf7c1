package actors_test

import (
	"slices"
	"testing"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
)

// TestHub_tail: a tail receives the entries appended for its run, in arrival order, until a
// change without them (Notify) or too many of them make it blind; Take starts afresh.
func TestHub_tail(t *testing.T) {
	entry := func(seq int64) *messages.LedgerEntry { return &messages.LedgerEntry{SharedRunId: "r1", Seq: seq} }
	seqs := func(l []*messages.LedgerEntry) []int64 {
		out := []int64{}
		for _, e := range l {
			out = append(out, e.Seq)
		}
		return out
	}
	h := actors.NewHub()
	tail, cancel := h.SubscribeTail("r1")
	defer cancel()
	other, cancelOther := h.SubscribeTail("r2")
	defer cancelOther()

	h.Appended("r1", []*messages.LedgerEntry{entry(2)})
	h.Appended("r1", []*messages.LedgerEntry{entry(1), entry(3)})
	select {
	case <-tail.C:
	default:
		t.Fatal("no wake-up after Appended")
	}
	got, complete := tail.Take()
	if want := []int64{2, 1, 3}; !complete || !slices.Equal(seqs(got), want) {
		t.Fatalf("take = %v complete %v, want %v complete", seqs(got), complete, want)
	}
	if got, complete := other.Take(); len(got) != 0 || !complete {
		t.Fatalf("another run's tail took %v complete %v", seqs(got), complete)
	}

	h.Appended("r1", []*messages.LedgerEntry{entry(4)})
	h.Notify("r1", false)
	h.Appended("r1", []*messages.LedgerEntry{entry(6)})
	if got, complete := tail.Take(); complete || len(got) != 0 {
		t.Fatalf("after a change without entries: take = %v complete %v, want blind", seqs(got), complete)
	}
	if got, complete := tail.Take(); !complete || len(got) != 0 {
		t.Fatalf("take after a blind take = %v complete %v, want empty and complete", seqs(got), complete)
	}

	many := make([]*messages.LedgerEntry, 300)
	for i := range many {
		many[i] = entry(int64(i + 1))
	}
	h.Appended("r1", many)
	if got, complete := tail.Take(); complete || len(got) != 0 {
		t.Fatalf("after more entries than a tail keeps: %d entries complete %v, want blind", len(got), complete)
	}
}
