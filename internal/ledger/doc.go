// Package ledger writes the history of a node's runs: the Committer batches fenced step
// commits and ledger appends from every run into few store calls, in order per run, and the
// Writer records control-plane decisions and terminal statuses through it.
//
// # Usage
//
//	c := ledger.NewCommitter(st, ledger.CommitterConfig{Notifier: hub})
//	c.Start(group) // one loop per shard; they drain and stop when the group stops
//	w := ledger.NewWriter(st, ledger.WriterConfig{Committer: c, Notifier: hub})
//	w.Record(ctx, &messages.LedgerEntry{Kind: messages.KindSubmitted, SharedRunId: id})
//
// Both types are goroutine-safe. History outside the fenced step commits is best-effort: Record
// logs failures instead of returning them, and a step commit carries its own entries atomically.
package ledger

import (
	"context"

	"github.com/dairuntime/dair/messages"
)

// Notifier is told that a run's ledger or status changed (terminal: the change ended the run).
// actors.Hub implements it. Its methods must not block.
type Notifier interface {
	Notify(runID string, terminal bool)
	// Appended tells of entries of runID's ledger as the store wrote them (Seq set, in Seq
	// order), so a local reader may pass them on without reading the store. The entries are
	// shared: nobody modifies them.
	Appended(runID string, entries []*messages.LedgerEntry)
}

// Group starts tracked goroutines; *workgroup.Group implements it. Go reports false, running
// nothing, once the group is stopping.
type Group interface {
	Go(fn func(ctx context.Context)) bool
}

// IsTerminalKind reports whether a ledger entry kind ends a run.
func IsTerminalKind(k string) bool {
	return k == messages.KindRunSucceeded || k == messages.KindRunFailed || k == messages.KindRunCancelled
}

func anyTerminal(entries []*messages.LedgerEntry) bool {
	for _, e := range entries {
		if IsTerminalKind(e.Kind) {
			return true
		}
	}
	return false
}
