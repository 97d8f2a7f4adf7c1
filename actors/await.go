package actors

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// awaitPoll is how often the awaited runs are read from the store, for the runs that end in
// another process (a run that ends in this one wakes its waiters at once, through the hub).
const awaitPoll = 200 * time.Millisecond

// awaitBatch bounds the runs one store call of the batched read covers.
const awaitBatch = 512

// runWatch batches the store reads of every Await of a node: while anyone waits, one
// goroutine of the node's group reads every awaited run each awaitPoll, in GetRuns calls of at
// most awaitBatch ids, and wakes the waiters of the runs that ended or are gone. Many waiters
// then cost one round trip per poll, not one each. Goroutine-safe.
type runWatch struct {
	st    store.Runs
	group *workgroup.Group
	log   *zap.Logger

	mu      sync.Mutex // guards waiters and polling
	waiters map[string]map[chan struct{}]struct{}
	polling bool // the read loop runs
}

func newRunWatch(st store.Runs, group *workgroup.Group, log *zap.Logger) *runWatch {
	return &runWatch{st: st, group: group, log: log, waiters: map[string]map[chan struct{}]struct{}{}}
}

// watch returns a channel that receives a value (coalesced) when a read finds runID ended or
// gone, and a cancel function that must be called once.
func (w *runWatch) watch(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	m := w.waiters[runID]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		w.waiters[runID] = m
	}
	m[ch] = struct{}{}
	if !w.polling {
		w.polling = w.group.Go(w.loop)
	}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.waiters[runID], ch)
		if len(w.waiters[runID]) == 0 {
			delete(w.waiters, runID)
		}
		w.mu.Unlock()
	}
}

// loop reads the awaited runs every awaitPoll until nobody waits or the group stops.
func (w *runWatch) loop(ctx context.Context) {
	tk := time.NewTicker(awaitPoll)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.polling = false
			w.mu.Unlock()
			return
		case <-tk.C:
		}
		ids := w.awaited()
		if ids == nil {
			return // polling was cleared under the lock: the next watch starts a new loop
		}
		for len(ids) > 0 {
			n := min(len(ids), awaitBatch)
			w.read(ctx, ids[:n])
			ids = ids[n:]
		}
	}
}

// awaited returns the awaited run ids, or nil (and marks the loop stopped) when none is.
func (w *runWatch) awaited() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waiters) == 0 {
		w.polling = false
		return nil
	}
	ids := make([]string, 0, len(w.waiters))
	for id := range w.waiters {
		ids = append(ids, id)
	}
	return ids
}

// read reads ids and wakes the waiters of those that ended or are gone. A failed read wakes
// nobody: the next poll tries again.
func (w *runWatch) read(ctx context.Context, ids []string) {
	runs, err := w.st.GetRuns(ctx, ids)
	if err != nil {
		w.log.Debug("read awaited runs", zap.Int("runs", len(ids)), zap.Error(err))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, r := range runs {
		if r != nil && !messages.IsTerminalRun(r.Status) {
			continue
		}
		for ch := range w.waiters[ids[i]] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
