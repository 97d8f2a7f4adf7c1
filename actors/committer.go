package actors

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// committer batches fenced step commits and ledger appends from every run of a node into few
// store calls. Everything of one shared run goes to the same shard and is written in
// submission order, so a run's ledger stays causal (admission before dispatch before a step's
// "started" before its "succeeded"). A transport failure (store
// down) is retried with backoff until the store answers again: the node stays up and loses
// nothing that was submitted.
type committer struct {
	st       store.Store
	log      *zap.Logger
	hub      *Hub
	shards   []chan commitReq
	maxBatch int

	stop chan struct{}
	wg   sync.WaitGroup
}

// commitReq is one fenced commit, or (when ledger is set) an unfenced ledger append, and the
// callback that receives its outcome (called from a committer goroutine; it must not block).
type commitReq struct {
	c      store.StepCommit
	ledger []*messages.LedgerEntry
	run    string
	done   func(error)
}

func newCommitter(st store.Store, log *zap.Logger, hub *Hub, shards, maxBatch int) *committer {
	if shards <= 0 {
		shards = 4
	}
	if maxBatch <= 0 {
		maxBatch = 256
	}
	c := &committer{st: st, log: log, hub: hub, maxBatch: maxBatch, stop: make(chan struct{})}
	for i := 0; i < shards; i++ {
		ch := make(chan commitReq, 4096)
		c.shards = append(c.shards, ch)
		c.wg.Add(1)
		go c.loop(ch)
	}
	return c
}

// submit hands a commit to its shard. It blocks only while the shard's buffer is full, and
// reports false after close.
func (c *committer) submit(r commitReq) bool {
	h := fnv.New32a()
	if _, err := h.Write([]byte(r.run)); err != nil {
		return false
	}
	ch := c.shards[int(h.Sum32()%uint32(len(c.shards)))]
	select {
	case ch <- r:
		return true
	case <-c.stop:
		return false
	}
}

func (c *committer) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

func (c *committer) loop(ch chan commitReq) {
	defer c.wg.Done()
	batch := make([]commitReq, 0, c.maxBatch)
	for {
		select {
		case r := <-ch:
			batch = append(batch[:0], r)
		case <-c.stop:
			c.drain(ch, batch[:0])
			return
		}
	fill:
		for len(batch) < c.maxBatch {
			select {
			case r := <-ch:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		for len(batch) > 0 {
			batch = c.writeSegment(batch)
		}
	}
}

// drain writes what was submitted before close, so that no caller waits for an answer that
// never comes: each write is tried once (write and append give up retrying once stop is
// closed and answer the error instead).
func (c *committer) drain(ch chan commitReq, batch []commitReq) {
	for {
		select {
		case r := <-ch:
			batch = append(batch, r)
			if len(batch) < c.maxBatch {
				continue
			}
		default:
		}
		if len(batch) == 0 {
			return
		}
		for len(batch) > 0 {
			batch = c.writeSegment(batch)
		}
	}
}

// writeSegment writes the longest prefix-compatible part of batch as one ledger append plus
// one commit batch and returns what must wait for the next round: a request of a run whose
// earlier request in the batch went to the other kind of write, so that every run's order
// holds although appends are written before commits.
func (c *committer) writeSegment(batch []commitReq) []commitReq {
	var appends, commits, later []commitReq
	hasCommit, hasAppend, deferred := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range batch {
		switch {
		case deferred[r.run]:
			later = append(later, r)
		case r.ledger != nil && !hasCommit[r.run]:
			appends = append(appends, r)
			hasAppend[r.run] = true
		case r.ledger == nil:
			commits = append(commits, r)
			hasCommit[r.run] = true
		default:
			deferred[r.run] = true
			later = append(later, r)
		}
	}
	if len(appends) > 0 {
		c.append(appends)
	}
	if len(commits) > 0 {
		c.write(commits)
	}
	return later
}

// append writes ledger-only requests in one call, retrying transport failures like write.
func (c *committer) append(reqs []commitReq) {
	var entries []*messages.LedgerEntry
	for _, r := range reqs {
		entries = append(entries, r.ledger...)
	}
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.st.Append(ctx, entries...)
		cancel()
		if err == nil {
			for _, r := range reqs {
				r.done(nil)
				if c.hub != nil {
					terminal := false
					for _, e := range r.ledger {
						terminal = terminal || isTerminalKind(e.Kind)
					}
					c.hub.Notify(r.run, terminal)
				}
			}
			return
		}
		c.log.Warn("ledger append failed; retrying", zap.Int("entries", len(entries)), zap.Error(err), zap.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-c.stop:
			t.Stop()
			for _, r := range reqs {
				r.done(err)
			}
			return
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// write commits one batch, retrying transport failures until the store answers or the
// committer closes. Retried batches may find a success already applied: the store reports
// ErrAlreadyCommitted, which the caller treats as committed.
func (c *committer) write(batch []commitReq) {
	commits, slot := merge(batch)
	backoff := 50 * time.Millisecond
	retried := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs, err := c.st.CommitSteps(ctx, commits)
		cancel()
		if err == nil {
			for i, r := range batch {
				e := errs[slot[i]]
				if retried && errors.Is(e, store.ErrAlreadyCommitted) {
					e = nil
				}
				r.done(e)
				if c.hub != nil {
					c.hub.Notify(r.run, false)
				}
			}
			return
		}
		c.log.Warn("commit batch failed; retrying", zap.Int("commits", len(batch)), zap.Error(err), zap.Duration("backoff", backoff))
		retried = true
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-c.stop:
			t.Stop()
			for _, r := range batch {
				r.done(err)
			}
			return
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// merge folds a step's "running" record into a later record of the same attempt in the same
// batch (a fast step finishes before its start was written): one fenced write then carries
// both ledger entries, in order, and the final state. slot[i] is the commit that carries
// batch[i].
func merge(batch []commitReq) (commits []store.StepCommit, slot []int) {
	type key struct {
		exec, step string
		attempts   int32
		epoch      int64
	}
	slot = make([]int, len(batch))
	pending := map[key]int{} // running record -> its index in commits
	commits = make([]store.StepCommit, 0, len(batch))
	for i, r := range batch {
		st := r.c.Step
		k := key{r.c.ExecutionID, st.GetStepId(), st.GetAttempts(), r.c.Epoch}
		if j, ok := pending[k]; ok && st.GetStatus() != "running" {
			prev := commits[j]
			ledger := make([]*messages.LedgerEntry, 0, len(prev.Ledger)+len(r.c.Ledger))
			ledger = append(append(ledger, prev.Ledger...), r.c.Ledger...)
			merged := r.c
			merged.Ledger = ledger
			if merged.Step.StartedAt == 0 {
				merged.Step.StartedAt = prev.Step.StartedAt
			}
			commits[j] = merged
			slot[i] = j
			delete(pending, k)
			continue
		}
		slot[i] = len(commits)
		if st.GetStatus() == "running" {
			pending[k] = len(commits)
		}
		commits = append(commits, r.c)
	}
	return commits, slot
}
