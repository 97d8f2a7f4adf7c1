package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// recoveryPhases is where the time of one recovery trial went, each phase as the first and
// last time after the fault that a run of the victim reached it.
type recoveryPhases struct {
	// verdict is when the first survivor declared the victim lost (from its log).
	verdict time.Duration
	// wrongVerdicts counts the lines of survivors' logs that declare a member other than the
	// victim lost: a live node taken for lost (under load, say).
	wrongVerdicts int
	// requeued, assigned, dispatched and resumed are the first and last ledger entries of the
	// victim's runs of each kind: recovery requeue, admission, dispatch, resumed execution.
	requeued, assigned, dispatched, resumed [2]time.Duration
	// last is the history of the run that resumed last: each entry's kind, reason and time
	// after the fault.
	last string
}

// String renders the phases in milliseconds after the fault.
func (p recoveryPhases) String() string {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	wrong := ""
	if p.wrongVerdicts > 0 {
		wrong = fmt.Sprintf(", %d WRONG VERDICTS", p.wrongVerdicts)
	}
	return fmt.Sprintf("verdict %dms%s, requeued %d–%dms, assigned %d–%dms, dispatched %d–%dms, resumed %d–%dms", ms(p.verdict), wrong,
		ms(p.requeued[0]), ms(p.requeued[1]), ms(p.assigned[0]), ms(p.assigned[1]), ms(p.dispatched[0]), ms(p.dispatched[1]),
		ms(p.resumed[0]), ms(p.resumed[1]))
}

// measurePhases reads, once a trial recovered, where the time went: the survivors' logs for
// the loss verdict (and verdicts on members other than the victim's, member), and the ledger of every run the victim held (entries after seq) for when it
// was requeued, dispatched again and resumed. It reads the store after the timing is over.
func measurePhases(ctx context.Context, st store.Store, pc *testkit.ProcessCluster, victim *testkit.ProcessNode, member string, fault time.Time,
	seqs map[string]int64) recoveryPhases {
	var p recoveryPhases
	for _, n := range pc.Nodes() {
		if n == victim {
			continue
		}
		if at, ok := firstLogLine(n.Logs(), "cluster member lost"); ok && (p.verdict == 0 || at.Sub(fault) < p.verdict) {
			p.verdict = at.Sub(fault)
		}
		for _, l := range strings.Split(n.Logs(), "\n") {
			if strings.Contains(l, "cluster member lost") && !strings.Contains(l, member) {
				p.wrongVerdicts++
			}
		}
	}
	widen := func(r *[2]time.Duration, at int64) {
		d := time.Unix(0, at).Sub(fault)
		if r[0] == 0 || d < r[0] {
			r[0] = d
		}
		r[1] = max(r[1], d)
	}
	var lastAt int64
	for id, seq := range seqs {
		entries, err := st.ReadLedger(ctx, id, seq, 0)
		if err != nil || len(entries) == 0 {
			continue
		}
		if at := entries[len(entries)-1].At; at > lastAt {
			lastAt, p.last = at, history(entries, fault)
		}
		for _, e := range entries {
			switch {
			case e.Kind == messages.KindRecovery && e.Reason == "resumed-from-committed-steps":
				widen(&p.resumed, e.At)
			case e.Kind == messages.KindRecovery:
				widen(&p.requeued, e.At)
			case e.Kind == messages.KindAdmission:
				widen(&p.assigned, e.At)
			case e.Kind == messages.KindDispatch:
				widen(&p.dispatched, e.At)
			}
		}
	}
	return p
}

// history renders ledger entries as kind/reason@ms after the fault.
func history(entries []*messages.LedgerEntry, fault time.Time) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, " %s/%s@%d", e.Kind, e.Reason, time.Unix(0, e.At).Sub(fault).Milliseconds())
	}
	return strings.TrimSpace(b.String())
}

// firstLogLine returns the time stamp of the first line of a node's console log that
// contains msg.
func firstLogLine(logs, msg string) (time.Time, bool) {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, msg) {
			continue
		}
		ts, _, _ := strings.Cut(line, "\t")
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}
