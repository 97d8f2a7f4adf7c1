package ledger

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

// CommitStore is what the Committer writes to.
type CommitStore interface {
	Append(ctx context.Context, entries ...*messages.LedgerEntry) ([]*messages.LedgerEntry, error)
	CommitSteps(ctx context.Context, commits []store.StepCommit) (errs []error, err error)
}

// Request is one fenced step commit, or (when Ledger is set) an unfenced ledger append, and
// the callback that receives its outcome. Done is called exactly once, from a committer
// goroutine, and must not block.
type Request struct {
	Commit store.StepCommit
	Ledger []*messages.LedgerEntry
	// Run is the shared run the request belongs to: its shard and its order.
	Run string
	// Async marks a request that nothing waits for. An async commit (a pure step's success,
	// whose dependents already run) may wait up to the start hold, like a step's "running"
	// record, for the records that follow it. An async append may, over a
	// store.AppendCommitter, wait up to the async hold.
	Async bool
	Done  func(error)
}

// CommitterConfig configures a Committer. The zero value of each field means its default.
type CommitterConfig struct {
	// Shards is the number of writer loops (runs are hashed to one). Default 4.
	Shards int
	// Batch is the most requests one store call carries. Default 256.
	Batch int
	// Log receives retry warnings. Default: no logging.
	Log *zap.Logger
	// Notifier is told of every written change. Optional.
	Notifier Notifier
	// StartHold is how long a batch of nothing but steps' "running" records waits for more
	// requests before it is written: a fast step's end then arrives in time to fold into its
	// start (one write per step instead of two, one after the other). Nothing waits for a
	// start record (the step runs meanwhile), and a batch with anything else in it goes at
	// once. Over a store.AppendCommitter an Async append waits like a start (it shares the
	// write of the step records that follow it). Default 500µs; negative: no wait.
	StartHold time.Duration
	// AsyncHold is how long a batch holding an Async append waits, over a
	// store.AppendCommitter, for the requests that follow it. A dispatch's outcome is recorded
	// while its execution starts (one store write, which the append would otherwise queue
	// behind) and before its first step's records: it waits for that step's commit, so a run's
	// path to its first commit is one write shorter. Nothing waits for the append; a crash
	// within the hold loses it as it would lose it on the way. Default 5ms; it never shortens
	// StartHold.
	AsyncHold time.Duration
}

// Validate reports a negative size.
func (c CommitterConfig) Validate() error {
	if c.Shards < 0 || c.Batch < 0 {
		return errors.New("ledger: committer config: Shards and Batch must not be negative")
	}
	return nil
}

func (c CommitterConfig) withDefaults() CommitterConfig {
	if c.Shards <= 0 {
		c.Shards = 4
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.StartHold == 0 {
		c.StartHold = defaultStartHold
	}
	if c.AsyncHold == 0 {
		c.AsyncHold = defaultAsyncHold
	}
	c.AsyncHold = max(c.AsyncHold, c.StartHold)
	return c
}

// defaultStartHold and defaultAsyncHold are CommitterConfig.StartHold's and AsyncHold's
// defaults.
const (
	defaultStartHold = 500 * time.Microsecond
	defaultAsyncHold = 5 * time.Millisecond
)

// commitAttempt bounds one store call of the committer.
const commitAttempt = 10 * time.Second

// Committer batches fenced step commits and ledger appends from every run of a node into few
// store calls. Everything of one shared run goes to the same shard and is written in
// submission order, so a run's ledger stays causal (admission before dispatch before a step's
// "started" before its "succeeded"). A transport failure (store down) is retried with backoff
// until the store answers again or the committer stops: the node stays up and loses nothing
// that was submitted.
//
// Its loops run in a Group (Start) and stop with it: each one stops taking requests, writes
// what was submitted before (each write tried once more), answers every request, and returns.
type Committer struct {
	st        CommitStore
	log       *zap.Logger
	hub       Notifier
	shards    []chan Request
	maxBatch  int
	hold      time.Duration // CommitterConfig.StartHold
	asyncHold time.Duration // CommitterConfig.AsyncHold
	// folds reports that the store writes an append and commits in one call
	// (store.AppendCommitter): only then may an async append wait for the commits after it.
	folds bool

	closing chan struct{} // closed when the committer starts stopping: wakes blocked submitters
	once    sync.Once
	mu      sync.RWMutex // guards closed; Submit holds it for reading while it hands a request in
	closed  bool
}

// NewCommitter returns a committer whose loops are not running yet (see Start). Requests
// submitted before Start wait in the shards' buffers.
func NewCommitter(st CommitStore, cfg CommitterConfig) *Committer {
	cfg = cfg.withDefaults()
	_, folds := st.(store.AppendCommitter)
	c := &Committer{st: st, log: cfg.Log, hub: cfg.Notifier, maxBatch: cfg.Batch, hold: cfg.StartHold, asyncHold: cfg.AsyncHold, folds: folds, closing: make(chan struct{})}
	for i := 0; i < cfg.Shards; i++ {
		c.shards = append(c.shards, make(chan Request, 4096))
	}
	return c
}

// Start runs one loop per shard in g. The loops stop when g's context ends.
func (c *Committer) Start(g Group) {
	for _, ch := range c.shards {
		g.Go(func(ctx context.Context) { c.loop(ctx, ch) })
	}
}

// Submit hands a request to its shard. It blocks only while the shard's buffer is full, and
// reports false (r.Done is then never called) once the committer is stopping. Goroutine-safe.
func (c *Committer) Submit(r Request) bool {
	h := fnv.New32a()
	if _, err := h.Write([]byte(r.Run)); err != nil {
		return false
	}
	ch := c.shards[int(h.Sum32()%uint32(len(c.shards)))]
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	select {
	case ch <- r:
		return true
	case <-c.closing:
		return false
	}
}

// shutdown makes Submit refuse from now on, once every submit in progress has returned.
func (c *Committer) shutdown() {
	c.once.Do(func() {
		close(c.closing)
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	})
}

func (c *Committer) loop(ctx context.Context, ch chan Request) {
	buf := make([]Request, 0, c.maxBatch) // each cycle's batch, reused
	var batch []Request
	for {
		select {
		case r := <-ch:
			batch = append(buf[:0], r)
		case <-ctx.Done():
			c.shutdown()
			c.drain(ctx, ch, buf[:0])
			return
		}
		batch = c.fill(ch, batch)
		if c.hold > 0 && len(batch) < c.maxBatch && c.holdable(batch) {
			batch = c.fill(ch, c.holdFor(ctx, ch, batch))
		}
		for len(batch) > 0 {
			batch = c.writeSegment(ctx, batch)
		}
	}
}

// fill adds the requests waiting in ch to batch, up to the batch size, without blocking.
func (c *Committer) fill(ch chan Request, batch []Request) []Request {
	for len(batch) < c.maxBatch {
		select {
		case r := <-ch:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// holdFor waits up to the start hold for more requests (a fast step's end, whose start is in
// batch), or up to the async hold once batch has an async append (for the step records that
// follow it), and returns batch with them: it returns as soon as batch is no longer holdable,
// or full.
func (c *Committer) holdFor(ctx context.Context, ch chan Request, batch []Request) []Request {
	if testHookHold != nil {
		testHookHold()
	}
	start, long := time.Now(), hasAsync(batch)
	t := time.NewTimer(c.hold)
	if long {
		t.Reset(c.asyncHold)
	}
	defer t.Stop()
	for len(batch) < c.maxBatch {
		select {
		case r := <-ch:
			batch = append(batch, r)
			if !c.holdable(batch[len(batch)-1:]) {
				return batch
			}
			if r.Async && r.Ledger != nil && !long {
				long = true
				t.Reset(time.Until(start.Add(c.asyncHold)))
			}
		case <-t.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// hasAsync reports whether batch has an async append.
func hasAsync(batch []Request) bool {
	for _, r := range batch {
		if r.Async && r.Ledger != nil {
			return true
		}
	}
	return false
}

// testHookHold, when set (by tests, before the committer starts), is called as a loop
// begins to hold a batch of starts.
var testHookHold func()

// holdable reports whether batch holds nothing but steps' "running" records, async commits
// and, over a store that folds appends into commits, async appends: requests nothing waits on,
// which may wait for company. (Elsewhere an async append would only be written later, and not
// in fewer calls.)
func (c *Committer) holdable(batch []Request) bool {
	for _, r := range batch {
		if r.Ledger != nil && (!r.Async || !c.folds) || r.Ledger == nil && !r.Async && r.Commit.Step.GetStatus() != messages.StepRunning {
			return false
		}
	}
	return len(batch) > 0
}

// drain writes what was submitted before the stop, so that no caller waits for an answer
// that never comes: each write is tried once (write and append give up retrying once ctx is
// done and answer the error instead).
func (c *Committer) drain(ctx context.Context, ch chan Request, batch []Request) {
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
			batch = c.writeSegment(ctx, batch)
		}
	}
}

// writeSegment writes the longest prefix-compatible part of batch as one ledger append plus
// one commit batch and returns what must wait for the next round: a request of a run whose
// earlier request in the batch went to the other kind of write, so that every run's order
// holds although appends are written before commits.
func (c *Committer) writeSegment(ctx context.Context, batch []Request) []Request {
	var appends, later []Request
	commits := make([]Request, 0, len(batch))
	hasCommit, deferred := map[string]bool{}, map[string]bool{}
	for _, r := range batch {
		switch {
		case deferred[r.Run]:
			later = append(later, r)
		case r.Ledger != nil && !hasCommit[r.Run]:
			appends = append(appends, r)
		case r.Ledger == nil:
			commits = append(commits, r)
			hasCommit[r.Run] = true
		default:
			deferred[r.Run] = true
			later = append(later, r)
		}
	}
	if ac, ok := c.st.(store.AppendCommitter); ok && len(appends) > 0 && len(commits) > 0 {
		c.appendAndWrite(ctx, ac, appends, commits)
		return later
	}
	if len(appends) > 0 {
		c.append(ctx, appends)
	}
	if len(commits) > 0 {
		c.write(ctx, commits)
	}
	return later
}

// retry calls try until it succeeds, backing off between attempts, and returns its last error
// once ctx is done. Each attempt gets its own bounded context, also after ctx is done (the
// drain's final attempt).
func (c *Committer) retry(ctx context.Context, what string, n int, try func(ctx context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitAttempt)
		err := try(actx)
		cancel()
		if err == nil {
			return nil
		}
		c.log.Warn(what+" failed; retrying", zap.Int("requests", n), zap.Error(err), zap.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// append writes ledger-only requests in one call.
func (c *Committer) append(ctx context.Context, reqs []Request) {
	entries := ledgerOf(reqs)
	var stored []*messages.LedgerEntry
	err := c.retry(ctx, "ledger append", len(reqs), func(ctx context.Context) error {
		var err error
		stored, err = c.st.Append(ctx, entries...)
		return err
	})
	c.appended(reqs, stored, err)
}

// ledgerOf is the entries of ledger-only requests, in order.
func ledgerOf(reqs []Request) []*messages.LedgerEntry {
	var entries []*messages.LedgerEntry
	for _, r := range reqs {
		entries = append(entries, r.Ledger...)
	}
	return entries
}

// appended answers ledger-only requests whose entries were stored (or failed with err).
func (c *Committer) appended(reqs []Request, stored []*messages.LedgerEntry, err error) {
	for _, r := range reqs {
		r.Done(err)
		if err == nil && c.hub != nil {
			publish(c.hub, stored[:len(r.Ledger)])
		}
		if err == nil {
			stored = stored[len(r.Ledger):]
		}
	}
}

// appendAndWrite writes ledger-only requests and a commit batch in one call (appends first,
// as writeSegment ordered them).
func (c *Committer) appendAndWrite(ctx context.Context, st store.AppendCommitter, appends, batch []Request) {
	entries := ledgerOf(appends)
	commits, slot := merge(batch)
	var (
		stored []*messages.LedgerEntry
		errs   []error
	)
	attempts := 0
	err := c.retry(ctx, "ledger append and commit batch", len(appends)+len(batch), func(ctx context.Context) error {
		attempts++
		var err error
		stored, errs, err = st.AppendAndCommitSteps(ctx, entries, commits)
		return err
	})
	c.appended(appends, stored, err)
	c.answer(batch, commits, slot, errs, attempts, err)
}

// publish tells hub of stored entries (of one run or more, each run's in Seq order).
func publish(hub Notifier, stored []*messages.LedgerEntry) {
	for len(stored) > 0 {
		n := 1
		for n < len(stored) && stored[n].SharedRunId == stored[0].SharedRunId {
			n++
		}
		hub.Appended(stored[0].SharedRunId, stored[:n])
		stored = stored[n:]
	}
}

// write commits one batch. Retried batches may find a success already applied: the store
// reports ErrAlreadyCommitted, which the caller treats as committed.
func (c *Committer) write(ctx context.Context, batch []Request) {
	commits, slot := merge(batch)
	var errs []error
	attempts := 0
	err := c.retry(ctx, "commit batch", len(batch), func(ctx context.Context) error {
		attempts++
		var err error
		errs, err = c.st.CommitSteps(ctx, commits)
		return err
	})
	c.answer(batch, commits, slot, errs, attempts, err)
}

// answer answers the requests of a written commit batch: batch[i] was carried by
// commits[slot[i]], whose outcome is errs[slot[i]] (or err for all); attempts counts the
// store calls made.
func (c *Committer) answer(batch []Request, commits []store.StepCommit, slot []int, errs []error, attempts int, err error) {
	told := make([]bool, len(commits))
	for i, r := range batch {
		if err != nil {
			r.Done(err)
			continue
		}
		e := errs[slot[i]]
		if attempts > 1 && errors.Is(e, store.ErrAlreadyCommitted) {
			e = nil
		}
		r.Done(e)
		if c.hub == nil || told[slot[i]] {
			continue
		}
		told[slot[i]] = true // a merged commit carries two requests: told once
		if appended := commits[slot[i]].Appended; len(appended) > 0 && e == nil {
			publish(c.hub, appended)
		} else {
			c.hub.Notify(r.Run, false)
		}
	}
}

// merge folds a step's "running" record into the later record of the same attempt in the same
// batch (a fast step finishes before its start was written): one fenced write then carries
// both ledger entries, in order, and the final state. The folded write takes the later record's
// place: the start moves forward to its own end, past the run's other records in between
// (other steps' records, none of which depends on this start: a step that needs it starts only
// after its end). Moving the end back to the start's place instead would carry it, and the
// run's finish that rides on a commit, ahead of records submitted before it. slot[i] is the
// commit that carries batch[i].
func merge(batch []Request) (commits []store.StepCommit, slot []int) {
	type key struct {
		exec, step string
		attempts   int32
		epoch      int64
	}
	const none = -1
	// into[j] is the record that the running record batch[j] folds into, carries[i] the running
	// record that batch[i] carries (none: no fold).
	into, carries := make([]int, len(batch)), make([]int, len(batch))
	pending := map[key]int{} // running record -> its index in batch
	for i, r := range batch {
		into[i], carries[i] = none, none
		st := r.Commit.Step
		k := key{r.Commit.ExecutionID, st.GetStepId(), st.GetAttempts(), r.Commit.Epoch}
		if st.GetStatus() == messages.StepRunning {
			pending[k] = i
			continue
		}
		if j, ok := pending[k]; ok {
			into[j], carries[i] = i, j
			delete(pending, k)
		}
	}
	slot = make([]int, len(batch))
	commits = make([]store.StepCommit, 0, len(batch))
	for i := range batch {
		start, end := i, i // the records written together with batch[i], itself included
		if k := into[i]; k != none {
			end = k
		} else if j := carries[i]; j != none {
			start = j
		}
		if here := end; i != here {
			continue // written at its end's place
		}
		c := batch[end].Commit
		if start != end {
			prev := batch[start].Commit
			ledger := make([]*messages.LedgerEntry, 0, len(prev.Ledger)+len(c.Ledger))
			c.Ledger = append(append(ledger, prev.Ledger...), c.Ledger...)
			if c.Step.StartedAt == 0 {
				c.Step.StartedAt = prev.Step.StartedAt
			}
		}
		slot[start], slot[end] = len(commits), len(commits)
		commits = append(commits, c)
	}
	return commits, slot
}
