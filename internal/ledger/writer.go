package ledger

import (
	"context"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/messages"
)

// WriterStore is what the Writer writes to directly.
type WriterStore interface {
	Append(ctx context.Context, entries ...*messages.LedgerEntry) ([]*messages.LedgerEntry, error)
	UpdateRunAndMeter(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error)) (*messages.SharedRun, *messages.LedgerEntry, error)
}

// WriterConfig configures a Writer. Every field is optional.
type WriterConfig struct {
	// Committer batches appends with the node's other writes. Default: none (direct appends).
	Committer *Committer
	// Notifier is told of every change the Writer makes. Optional.
	Notifier Notifier
	// Log receives write failures. Default: no logging.
	Log *zap.Logger
}

// Writer records control-plane decisions in run ledgers and finishes runs with their terminal
// entry. It is goroutine-safe.
type Writer struct {
	st      WriterStore
	commits *Committer
	hub     Notifier
	log     *zap.Logger
}

// NewWriter returns a writer over st.
func NewWriter(st WriterStore, cfg WriterConfig) *Writer {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Writer{st: st, commits: cfg.Committer, hub: cfg.Notifier, log: cfg.Log}
}

// Record appends entries (batched with other runs' writes by the committer, in order per run)
// and wakes local waiters. It blocks until the entries are durable or ctx ends. Errors are
// logged, not returned: history is best-effort outside the fenced step commits, which carry
// their own entries atomically; the committer retries transport failures. Without a running
// committer (none, or stopping) the entries are appended directly.
func (w *Writer) Record(ctx context.Context, entries ...*messages.LedgerEntry) {
	byRun(entries, func(run string, group []*messages.LedgerEntry) {
		done := make(chan error, 1)
		if w.commits == nil || !w.commits.Submit(Request{Ledger: group, Run: run, Done: func(err error) { done <- err }}) {
			w.appendDirect(ctx, group)
			return
		}
		select {
		case err := <-done:
			if err != nil {
				w.log.Warn("ledger append failed", zap.String("kind", group[0].Kind), zap.String("shared_run_id", run), zap.Error(err))
			}
		case <-ctx.Done():
			w.log.Warn("ledger append abandoned", zap.String("kind", group[0].Kind), zap.String("shared_run_id", run), zap.Error(ctx.Err()))
		}
	})
}

// byRun calls fn with each run of consecutive entries of the same run, in order.
func byRun(entries []*messages.LedgerEntry, fn func(run string, group []*messages.LedgerEntry)) {
	for len(entries) > 0 {
		run := entries[0].SharedRunId
		n := 1
		for n < len(entries) && entries[n].SharedRunId == run {
			n++
		}
		fn(run, entries[:n])
		entries = entries[n:]
	}
}

// FinishRun updates run id with fn and, when fn reports that it changed the run, appends entry
// to the run's ledger in the same store write (a terminal status never exists without its
// terminal entry). A change that ends the run also stores its `run` usage event in that write
// (RunUsage), so a run that ends before any execution does (cancelled while queued, failed by
// a suspension) is metered like one that ran. It returns the stored run and whether fn changed
// it. fn may be called more than once.
func (w *Writer) FinishRun(ctx context.Context, id string, entry *messages.LedgerEntry, fn func(r *messages.SharedRun) bool) (*messages.SharedRun, bool, error) {
	return w.FinishRunMetered(ctx, id, entry, nil, fn)
}

// FinishRunMetered is FinishRun that stores usage (when not nil) as the run's usage event in
// the same store write as entry: the run is metered exactly when its terminal write lands,
// once whatever the number of finishers or retries.
func (w *Writer) FinishRunMetered(ctx context.Context, id string, entry *messages.LedgerEntry, usage *messages.UsageEvent, fn func(r *messages.SharedRun) bool) (*messages.SharedRun, bool, error) {
	changed := false
	run, appended, err := w.st.UpdateRunAndMeter(ctx, id, func(r *messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error) {
		ended := messages.IsTerminalRun(r.Status)
		changed = fn(r)
		switch {
		case !changed:
			return nil, nil, nil
		case usage == nil && !ended && messages.IsTerminalRun(r.Status):
			return entry, RunUsage(r), nil
		}
		return entry, usage, nil
	})
	if err != nil {
		return nil, false, err
	}
	if appended != nil && w.hub != nil {
		w.hub.Appended(id, []*messages.LedgerEntry{appended})
	}
	return run, changed, nil
}

// Notify tells local waiters that run runID's ledger changed through a write the Writer did not
// make (terminal: the change ended the run). It does not block.
func (w *Writer) Notify(runID string, terminal bool) {
	if w.hub != nil {
		w.hub.Notify(runID, terminal)
	}
}

// appendDirect writes entries without the committer.
func (w *Writer) appendDirect(ctx context.Context, entries []*messages.LedgerEntry) {
	stored, err := w.st.Append(ctx, entries...)
	if err != nil {
		w.log.Warn("ledger append failed", zap.String("kind", entries[0].Kind), zap.String("shared_run_id", entries[0].SharedRunId), zap.Error(err))
		return
	}
	if w.hub != nil {
		publish(w.hub, stored)
	}
}

// RecordAsync is Record without waiting: the entries are handed to the committer (in order
// with the run's other writes) and the call returns; a failure is logged. Without a running
// committer it appends directly, blocking like Record. Use it for entries nothing waits on.
func (w *Writer) RecordAsync(ctx context.Context, entries ...*messages.LedgerEntry) {
	byRun(entries, func(run string, group []*messages.LedgerEntry) {
		done := func(err error) {
			if err != nil {
				w.log.Warn("ledger append failed", zap.String("kind", group[0].Kind), zap.String("shared_run_id", run), zap.Error(err))
			}
		}
		if w.commits == nil || !w.commits.Submit(Request{Ledger: group, Run: run, Async: true, Done: done}) {
			w.appendDirect(ctx, group)
		}
	})
}

// RunUsage is the `run` usage event of run r's end (the store sets its At).
func RunUsage(r *messages.SharedRun) *messages.UsageEvent {
	tenant := r.GetSnapshot().GetTenantId()
	if tenant == "" {
		tenant = r.TenantId
	}
	return &messages.UsageEvent{Kind: "run", TenantId: tenant, SharedRunId: r.SharedRunId, ExecutionId: r.ExecutionId}
}
