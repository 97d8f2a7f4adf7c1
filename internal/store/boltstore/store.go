package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
)

// Sentinel errors of the bolt backend (the store package's sentinels are used for the contract).
var (
	// ErrLocked is returned by Open when another process holds the file.
	ErrLocked = errors.New("boltstore: database is locked by another process")
	// ErrClosed is returned by writes made after Close.
	ErrClosed = errors.New("boltstore: closed")
)

// lockTimeout bounds how long Open waits for the file lock.
const lockTimeout = time.Second

// maxGroup caps the number of write requests coalesced into one transaction.
const maxGroup = 256

// Bucket names, one per concern plus indexes.
var (
	bRuns          = []byte("runs")           // id -> SharedRun; id \0 "v" -> record version (absent: store.CreatedRunVersion)
	bRunsIdem      = []byte("runs_idem")      // tenant \0 key -> id
	bRunsCreated   = []byte("runs_created")   // ^createdAt \0.. id -> nil (newest first)
	bRunsVer       = []byte("runs_ver")       // id -> record version, in files written before 2026-12 (read only)
	bRunsLive      = []byte("runs_live")      // as runs_created, for the runs that are not final
	bRunsParked    = []byte("runs_parked")    // as runs_created, for the runs parked for scale-out
	bQueueItems    = []byte("queue_items")    // runID -> queueItem
	bQueuePending  = []byte("queue_pending")  // seq + runID -> nil
	bQueueClaims   = []byte("queue_claims")   // deadline + runID -> nil
	bInstances     = []byte("instances")      // id -> deadline + CapacityDescriptor
	bReservations  = []byte("reservations")   // instance \0 run -> deadline
	bExecutions    = []byte("executions")     // id -> Execution
	bSteps         = []byte("steps")          // exec \0 step -> StepState
	bExecByInst    = []byte("exec_by_inst")   // instance \0 exec -> nil (non-terminal only)
	bLedger        = []byte("ledger")         // run \0 seq -> LedgerEntry
	bTenants       = []byte("tenants")        // id -> TenantSettings
	bScaleOuts     = []byte("scaleouts")      // id -> ScaleOutRequest
	bPipelines     = []byte("pipelines")      // key \0 hash -> PipelineVersion
	bPipelinesLast = []byte("pipelines_last") // key -> hash
	bUsage         = []byte("usage")          // at + seq -> UsageEvent
	bUsageMarks    = []byte("usage_marks")    // exec \0 step/attempt -> nil (metered commits)
	bLeases        = []byte("leases")         // name -> deadline + holder
	bTenantStates  = []byte("tenant_states")  // tenant id -> TenantState
	bInstRecords   = []byte("inst_records")   // runtime instance id -> InstanceRecord
	bInstRecByTen  = []byte("inst_by_tenant") // tenant \0 runtime instance id -> nil
)

// allBuckets are created at Open. (Files written before 2026-12 also hold a "ledger_seq" bucket,
// no longer read or written: a run's last Seq is its last ledger key.)
var allBuckets = [][]byte{bRuns, bRunsVer, bRunsIdem, bRunsCreated, bQueueItems, bQueuePending, bQueueClaims,
	bInstances, bReservations, bExecutions, bSteps, bExecByInst, bLedger, bTenants,
	bScaleOuts, bPipelines, bPipelinesLast, bUsage, bUsageMarks, bLeases, bTenantStates, bInstRecords, bInstRecByTen,
	bQueueTenant, bQueueTenantPending, bQueueTenantCount, bHoldOf, bRate}

// Options configures Open.
type Options struct {
	// Path is the database file; its parent directory is created. Required.
	Path string
	// Now is the clock for every timestamp and expiry decision. Default time.Now.
	Now func() time.Time
	// NoSync skips fsync on commit. Only for tests and benchmarks; default false.
	NoSync bool
	// DeferHold is how long a write nothing urgent waits on (an instance's descriptor, see
	// PutInstance) may wait for another write to share its transaction. Default 2ms;
	// negative: no wait.
	DeferHold time.Duration
}

// defaultDeferHold is Options.DeferHold's default.
const defaultDeferHold = 2 * time.Millisecond

// Store is the bbolt-backed store.Store. It is safe for concurrent use within one process.
type Store struct {
	db        *bolt.DB
	now       func() time.Time
	deferHold time.Duration // Options.DeferHold

	writes    chan writeReq
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// writeReq is one write handed to the owner goroutine. fn may run more than once (after a
// sibling in its group failed) and must reset any result it records.
type writeReq struct {
	fn   func(tx *bolt.Tx) error
	done chan error
	// deferrable: the write may wait up to the defer hold for company (see updateDeferred).
	deferrable bool
}

// Open opens or creates the database at opts.Path and starts its writer goroutine. It blocks
// up to one second for the file lock and returns ErrLocked when another process holds it.
func Open(opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("boltstore: open: empty path")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DeferHold == 0 {
		opts.DeferHold = defaultDeferHold
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o755); err != nil {
		return nil, fmt.Errorf("boltstore: create dir: %w", err)
	}
	db, err := bolt.Open(opts.Path, 0o600, &bolt.Options{Timeout: lockTimeout, NoSync: opts.NoSync,
		FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w", opts.Path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", opts.Path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		fresh := tx.Bucket(bRunsLive) == nil || tx.Bucket(bRunsParked) == nil
		for _, name := range append(allBuckets[:len(allBuckets):len(allBuckets)], bRunsLive, bRunsParked) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("bucket %s: %w", name, err)
			}
		}
		if fresh {
			return buildLiveIndex(tx) // a file written before the indexes existed
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("boltstore: init %s: %w", opts.Path, err), db.Close())
	}
	s := &Store{db: db, now: opts.Now, deferHold: opts.DeferHold, writes: make(chan writeReq), stop: make(chan struct{}),
		stopped: make(chan struct{})}
	go s.writeLoop()
	return s, nil
}

// Close stops the writer goroutine and closes the file. It is idempotent; writes after Close
// return ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.stopped
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close: %w", err)
		}
	})
	return s.closeErr
}

// writeLoop is the owner goroutine: it takes one write, gathers every write already waiting,
// and commits them in one transaction. A group of nothing but deferrable writes first waits
// for an urgent one to join it (holdDeferred).
func (s *Store) writeLoop() {
	defer close(s.stopped)
	group := make([]writeReq, 0, maxGroup)
	for {
		select {
		case <-s.stop:
			return
		case req := <-s.writes:
			group = s.gather(append(group[:0], req))
			if s.deferHold > 0 && deferrable(group) {
				group = s.holdDeferred(group)
			}
			s.commitGroup(group)
		}
	}
}

// gather adds the writes already waiting to group, up to maxGroup, without blocking.
func (s *Store) gather(group []writeReq) []writeReq {
	for len(group) < maxGroup {
		select {
		case r := <-s.writes:
			group = append(group, r)
		default:
			return group
		}
	}
	return group
}

// deferrable reports whether every write of group may wait for company.
func deferrable(group []writeReq) bool {
	for _, r := range group {
		if !r.deferrable {
			return false
		}
	}
	return true
}

// holdDeferred waits up to the defer hold for a write that is not deferrable and returns group
// with it (and what waits behind it): the deferred writes then cost a few pages of that
// transaction instead of a transaction of their own, two fsyncs that an urgent write arriving
// meanwhile would queue behind. It returns group as it is when the hold ends, the group is
// full, or the store closes.
func (s *Store) holdDeferred(group []writeReq) []writeReq {
	if testHookHold != nil {
		testHookHold()
	}
	t := time.NewTimer(s.deferHold)
	defer t.Stop()
	for len(group) < maxGroup {
		select {
		case r := <-s.writes:
			group = append(group, r)
			if !r.deferrable {
				return s.gather(group)
			}
		case <-t.C:
			return group
		case <-s.stop:
			return group
		}
	}
	return group
}

// testHookHold, when set (by tests, before Open), is called as the writer begins to hold a
// group of deferrable writes; testHookCommit, when set, with the number of writes of each
// group it commits.
var (
	testHookHold   func()
	testHookCommit func(writes int)
)

// errSibling aborts a group transaction when one of its writes failed.
var errSibling = errors.New("boltstore: write in group failed")

// commitGroup runs every write of group in one transaction. When one write fails, the group is
// rolled back and each write runs again in its own transaction, so a failure stays private.
func (s *Store) commitGroup(group []writeReq) {
	if testHookCommit != nil {
		testHookCommit(len(group))
	}
	if len(group) > 1 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for _, r := range group {
				if err := r.fn(tx); err != nil {
					return errSibling
				}
			}
			return nil
		})
		if !errors.Is(err, errSibling) {
			for _, r := range group {
				r.done <- err
			}
			return
		}
	}
	for _, r := range group {
		r.done <- s.db.Update(r.fn)
	}
}

// update runs fn in a write transaction (possibly shared with other writers). It blocks until
// the transaction committed or failed.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.write(ctx, writeReq{fn: fn, done: make(chan error, 1)})
}

// updateDeferred is update for a write that nothing urgent waits on: it may wait up to the
// defer hold for another write to share its transaction (and blocks that much longer).
func (s *Store) updateDeferred(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.write(ctx, writeReq{fn: fn, done: make(chan error, 1), deferrable: true})
}

// write hands req to the writer goroutine and waits for its outcome.
func (s *Store) write(ctx context.Context, req writeReq) error {
	if err := s.queue(ctx, req); err != nil {
		return err
	}
	return <-req.done
}

// queue hands req to the writer goroutine: once it returns nil, req applies before every
// write queued after it, and its outcome comes on req.done.
func (s *Store) queue(ctx context.Context, req writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.writes <- req:
		return nil
	case <-s.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// view runs fn in a read transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// nowNanos returns the clock as Unix nanoseconds.
func (s *Store) nowNanos() int64 { return s.now().UnixNano() }

// get unmarshals the value at key of bucket into m; it reports false when absent.
func get(tx *bolt.Tx, bucket, key []byte, m proto.Message) (bool, error) {
	v := tx.Bucket(bucket).Get(key)
	if v == nil {
		return false, nil
	}
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// getFound is get for a record that must exist: a missing key is store.ErrNotFound (the caller
// wraps it with the operation and id).
func getFound(tx *bolt.Tx, bucket, key []byte, m proto.Message) error {
	ok, err := get(tx, bucket, key, m)
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	return err
}

// put marshals m under key of bucket.
func put(tx *bolt.Tx, bucket, key []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	if err := tx.Bucket(bucket).Put(key, v); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return nil
}
