package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
)

var ledgerTests = []contractTest{
	{"Append_assignsSeqAndAt", testAppendAssigns},
	{"ReadLedger_window", testReadLedgerWindow},
	{"Append_concurrentContiguous", testAppendConcurrent},
}

func testAppendAssigns(t *testing.T, e *env) {
	at := epoch.Add(-time.Hour).UnixNano()
	given := entry("r1", messages.KindAdmission)
	given.At = at
	got, err := e.st.Append(e.ctx, entry("r1", messages.KindSubmitted), entry("r2", messages.KindSubmitted), given)
	noErr(t, err)
	equal(t, "returned", len(got), 3)
	equal(t, "r1 seq", got[0].GetSeq(), int64(1))
	equal(t, "r2 seq", got[1].GetSeq(), int64(1))
	equal(t, "r1 second seq", got[2].GetSeq(), int64(2))
	equal(t, "assigned at", got[0].GetAt(), epoch.UnixNano())
	equal(t, "given at", got[2].GetAt(), at)

	e.clock.Advance(time.Second)
	more, err := e.st.Append(e.ctx, entry("r1", messages.KindDispatch))
	noErr(t, err)
	equal(t, "third seq", more[0].GetSeq(), int64(3))

	led := readLedger(t, e, "r1")
	checkContiguous(t, led, 3)
	equalIDs(t, "kinds", ids(led, (*messages.LedgerEntry).GetKind),
		[]string{messages.KindSubmitted, messages.KindAdmission, messages.KindDispatch})
	equal(t, "stored at", led[2].GetAt(), epoch.Add(time.Second).UnixNano())
	equal(t, "unknown run", len(readLedger(t, e, "nope")), 0)
}

func testReadLedgerWindow(t *testing.T, e *env) {
	for i := range 10 {
		_, err := e.st.Append(e.ctx, &messages.LedgerEntry{SharedRunId: "r1", Kind: messages.KindStepRetry, Attempt: int32(i + 1)})
		noErr(t, err)
	}
	seqs := func(l []*messages.LedgerEntry) []string {
		return ids(l, func(en *messages.LedgerEntry) string { return fmt.Sprint(en.GetSeq()) })
	}
	tests := []struct {
		name         string
		after, limit int
		want         []string
	}{
		{"all", 0, 0, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}},
		{"after", 7, 0, []string{"8", "9", "10"}},
		{"limit", 0, 2, []string{"1", "2"}},
		{"afterLimit", 4, 3, []string{"5", "6", "7"}},
		{"pastEnd", 10, 5, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.st.ReadLedger(e.ctx, "r1", int64(tc.after), tc.limit)
			noErr(t, err)
			equalIDs(t, "seqs", seqs(got), tc.want)
		})
	}
}

func testAppendConcurrent(t *testing.T, e *env) {
	const writers, perWriter = 8, 25
	runConcurrently(t, writers, func(w int) error {
		for range perWriter {
			if _, err := e.st.Append(e.ctx, entry("r1", messages.KindStepStarted), entry("r2", messages.KindStepStarted)); err != nil {
				return err
			}
		}
		return nil
	})
	checkContiguous(t, readLedger(t, e, "r1"), writers*perWriter)
	checkContiguous(t, readLedger(t, e, "r2"), writers*perWriter)
}
