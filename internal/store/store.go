// Package store defines dair's durable state: one Store interface with two backends (Redis for
// clusters, an embedded bbolt file for one node) that pass one contract test suite (storetest).
//
// Every method blocks on I/O, takes a context, and is safe for concurrent use. Messages passed
// in are not retained (backends marshal them); messages returned are owned by the caller.
package store

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/dairuntime/dair/messages"
)

// Sentinel errors. Backends wrap them with %w; callers test with errors.Is.
var (
	// ErrNotFound is returned by Get* and Update* methods when the id does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrStaleEpoch is returned by fenced writes whose epoch is not the execution's current epoch.
	ErrStaleEpoch = errors.New("store: stale epoch")
	// ErrAlreadyCommitted is returned by CommitSteps for a write (of any status) to a step that
	// has already succeeded: a succeeded step is final.
	ErrAlreadyCommitted = errors.New("store: step already committed")
	// ErrExists is returned by Create* methods when the id is taken.
	ErrExists = errors.New("store: already exists")
	// ErrClaimLost is returned by Ack when the claim token no longer owns the queue item.
	ErrClaimLost = errors.New("store: claim lost")
	// ErrMemberDead is returned by PutInstance for a descriptor of a cluster member that has
	// been declared dead (see TombstoneLease).
	ErrMemberDead = errors.New("store: member declared dead")
)

// TombstoneHolderPrefix starts the holder of every tombstone lease.
const TombstoneHolderPrefix = "declared-by:"

// TombstoneLease names the lease that marks cluster member (an actor system id) as declared
// dead. While it is held by a holder starting with TombstoneHolderPrefix, PutInstance refuses
// descriptors whose NodeId is member: a dead member's instances cannot come back into the
// registry (for instance re-published by the member before it learned of its death).
func TombstoneLease(member string) string { return "dead/" + member }

// Store is the whole durable state of a dair deployment.
type Store interface {
	Runs
	Queue
	Registry
	Reservations
	Executions
	Ledger
	Tenants
	ScaleOuts
	Pipelines
	Usage
	Leases
	TenantStates
	InstanceRecords
	TenantQueues
	TenantQuotas
	// Close releases the backend. It is idempotent.
	Close() error
}

// RunFilter selects runs in ListRuns. Zero fields match everything.
type RunFilter struct {
	TenantID string
	Status   string
	// Statuses, when set, matches a run in any of them (and Status too, when set).
	Statuses []string
	// Limit caps the answer; 0 means 1000.
	Limit int
}

// LiveOnly reports whether every run f can match is not final (a status field names only
// active statuses), so that a store may list them from its index of live runs.
func (f RunFilter) LiveOnly() bool {
	if f.Status != "" && !messages.IsTerminalRun(f.Status) {
		return true
	}
	if len(f.Statuses) == 0 {
		return false
	}
	for _, st := range f.Statuses {
		if messages.IsTerminalRun(st) {
			return false
		}
	}
	return true
}

// ParkedOnly reports whether every run f can match is parked for scale-out (status
// scale_out_requested), so that a store may list them from its index of parked runs.
func (f RunFilter) ParkedOnly() bool {
	if f.Status != messages.RunScaleOutRequested && f.Status != "" {
		return false
	}
	if len(f.Statuses) == 0 {
		return f.Status == messages.RunScaleOutRequested
	}
	for _, st := range f.Statuses {
		if st != messages.RunScaleOutRequested {
			return false
		}
	}
	return true
}

// MatchesStatus reports whether a run of status passes f's status fields.
func (f RunFilter) MatchesStatus(status string) bool {
	return (f.Status == "" || status == f.Status) && (len(f.Statuses) == 0 || slices.Contains(f.Statuses, status))
}

// Runs stores SharedRun records.
type Runs interface {
	// CreateRun stores a new run. When run.IdempotencyKey is set and a run of the same tenant
	// already holds that key, CreateRun stores nothing and returns that run with created=false.
	// A duplicate SharedRunId returns ErrExists.
	CreateRun(ctx context.Context, run *messages.SharedRun) (existing *messages.SharedRun, created bool, err error)
	// GetRun returns the run or ErrNotFound.
	GetRun(ctx context.Context, id string) (*messages.SharedRun, error)
	// RunByIdempotencyKey returns the run of tenant that holds idempotency key, or
	// ErrNotFound (a submit's retry finds its run before any quota is checked).
	RunByIdempotencyKey(ctx context.Context, tenant, key string) (*messages.SharedRun, error)
	// GetRuns returns the runs of ids in one store call, in ids' order, with nil for a run
	// that does not exist.
	GetRuns(ctx context.Context, ids []string) ([]*messages.SharedRun, error)
	// UpdateRun applies fn to the current run atomically (optimistic retry on Redis, one
	// transaction on bbolt) and stores the result. fn may be called more than once; an error
	// from fn aborts the update and is returned as is.
	UpdateRun(ctx context.Context, id string, fn func(*messages.SharedRun) error) (*messages.SharedRun, error)
	// UpdateRunAndAppend is UpdateRun whose fn may also return a ledger entry of the run: the
	// run and the entry are written together or not at all, so a run's terminal status is
	// never visible without its terminal ledger entry (nor lost on a crash between the two).
	// It returns the stored run and a copy of the appended entry with Seq and At set (nil when
	// fn returned none).
	UpdateRunAndAppend(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, error)) (*messages.SharedRun, *messages.LedgerEntry, error)
	// UpdateRunAndMeter is UpdateRunAndAppend whose fn may also return a usage event: the
	// run, the entry and the event are written together or not at all, so a run is metered
	// exactly when its terminal write lands (At is set by the store when zero). The event is
	// stored only with an entry; an event without one is an error.
	UpdateRunAndMeter(ctx context.Context, id string, fn func(*messages.SharedRun) (*messages.LedgerEntry, *messages.UsageEvent, error)) (*messages.SharedRun, *messages.LedgerEntry, error)
	// ListRuns returns runs newest first.
	ListRuns(ctx context.Context, f RunFilter) ([]*messages.SharedRun, error)
	// ScanRuns calls fn with every run matching f (f.Limit is ignored), in pages of at most
	// page runs and in no particular order, so that a caller can go through more runs than
	// it could hold at once (recovery's rounds over every active run). A run that matches
	// for the whole scan is passed at least once (Redis may pass one twice); one written
	// meanwhile may or may not be. An error of fn ends the scan and is returned.
	ScanRuns(ctx context.Context, f RunFilter, page int, fn func([]*messages.SharedRun) error) error
}

// Claim is one shared-queue item held by a pump until Ack or until its visibility times out.
type Claim struct {
	RunID string
	// Token identifies this claim; a later claim of the same item gets a new token.
	Token string
}

// Queue is the shared queue of runs waiting for dispatch.
type Queue interface {
	// Enqueue makes runID pending. Enqueuing a pending or claimed run is a no-op.
	Enqueue(ctx context.Context, runID string) error
	// EnqueueFront is Enqueue ahead of every pending item, in the shared order and in its
	// tenant's: a run recovered from a lost instance had its turn already, and must not wait
	// behind the runs queued after it. A later EnqueueFront goes ahead of an earlier one.
	EnqueueFront(ctx context.Context, runID string) error
	// Claim takes up to max pending items for pumpID. Items whose claims timed out (their pump
	// died) are pending again, in their places, before the claim is taken. A claimed item becomes pending again
	// after visibility unless acked or released.
	Claim(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]Claim, error)
	// Ack removes a claimed item from the queue. It returns ErrClaimLost when the token no longer
	// holds the item (the claim timed out and another pump took it).
	Ack(ctx context.Context, c Claim) error
	// Release makes a claimed item pending again at once, in the place it was claimed from
	// (ahead of the items queued after it).
	Release(ctx context.Context, c Claim) error
	// ReleaseClaimsOf makes every item claimed by pumpID pending again at once, each in its
	// place, without waiting for visibility: the pump is known dead (its member was declared
	// dead, or its node restarted). It returns how many items it released.
	ReleaseClaimsOf(ctx context.Context, pumpID string) (int, error)
	// QueueDepth returns the pending and claimed counts.
	QueueDepth(ctx context.Context) (pending, claimed int64, err error)
}

// Registry stores runtime instance capacity descriptors with heartbeat expiry.
type Registry interface {
	// PutInstance stores d (keyed by RuntimeInstanceId) and keeps it listed for ttl from now.
	// It returns ErrMemberDead and stores nothing when d.NodeId is tombstoned.
	PutInstance(ctx context.Context, d *messages.CapacityDescriptor, ttl time.Duration) error
	// GetInstance returns a live descriptor or ErrNotFound (also when expired).
	GetInstance(ctx context.Context, id string) (*messages.CapacityDescriptor, error)
	// ListInstances returns every live (unexpired) descriptor ordered by id.
	ListInstances(ctx context.Context) ([]*messages.CapacityDescriptor, error)
	// DeleteInstance removes a descriptor; deleting a missing id is not an error.
	DeleteInstance(ctx context.Context, id string) error
}

// Reservations are atomic run-slot holds on runtime instances. The sum of live reservations
// of an instance never exceeds the limit passed to Reserve, whatever the number of concurrent
// callers or processes.
type Reservations interface {
	// Reserve holds one slot of instanceID for runID for ttl if fewer than limit live holds
	// exist. Reserving again for the same run refreshes it and reports true.
	Reserve(ctx context.Context, instanceID, runID string, limit int, ttl time.Duration) (bool, error)
	// RefreshReservations extends the holds of runIDs on instanceID to ttl from now.
	RefreshReservations(ctx context.Context, instanceID string, runIDs []string, ttl time.Duration) error
	// ReleaseReservation drops a hold; releasing a missing hold is not an error.
	ReleaseReservation(ctx context.Context, instanceID, runID string) error
	// ReservationCount returns the number of live holds on instanceID.
	ReservationCount(ctx context.Context, instanceID string) (int, error)
	// ReservationExpiries returns, for each of runIDs, when its live hold on instanceID lapses,
	// or the zero time when it holds none, in one store round trip. An instance refreshes the
	// hold of every run it has (on receipt and at each heartbeat), so a dispatched run whose
	// hold was never extended past what its pump reserved was never received: the pump died
	// between marking it and delivering it.
	ReservationExpiries(ctx context.Context, instanceID string, runIDs []string) ([]time.Time, error)
}

// StepCommit is one fenced step write, optionally with ledger entries appended atomically.
type StepCommit struct {
	ExecutionID string
	Epoch       int64
	Step        *messages.StepState
	// Ledger entries are appended to the execution's shared-run ledger in the same atomic write
	// (their Seq and At are assigned by the store when zero). The caller's entries are not
	// modified.
	Ledger []*messages.LedgerEntry
	// Appended is set by CommitSteps when the commit was written: the stored copies of Ledger,
	// in its order, with Seq, At and SharedRunId set (what a reader of the ledger gets). It is
	// nil for a commit that was not written. Callers leave it nil.
	Appended []*messages.LedgerEntry
	// Usage, when set, is the metering event of this write (the step's success): it is stored
	// in the same atomic write as the step, so only a commit that is written meters, and at
	// most once per (ExecutionID, Step.StepId, Step.Attempts) whatever the number of calls
	// carrying it. Its At is set by the store when zero. Optional.
	Usage *messages.UsageEvent
	// Finish, with a backend that is a CommitFinisher, ends the execution in the same atomic
	// write, after the commit, as ExecutionLifecycle.FinishExecution would (its ExecutionID
	// and Epoch are the commit's): only when the commit is written or the step had already
	// succeeded. Its outcome goes to *Finished, which must then be set. Optional; a backend
	// that is not a CommitFinisher refuses a commit with Finish.
	Finish   *ExecutionFinish
	Finished *FinishOutcome
}

// FinishOutcome is what the Finish of a StepCommit did: Result as FinishExecution answers, or
// Err, its contract error (nothing of the finish written; ErrNotFound for a missing run),
// or, when the commit itself was refused, that refusal (the finish was not tried).
type FinishOutcome struct {
	Result FinishResult
	Err    error
}

// CommitFinisher is an optional capability of a backend, checked by type assertion: its
// CommitSteps writes a commit's Finish in the commit's write (one transaction where two would
// follow each other). FinishesCommits reports true.
type CommitFinisher interface {
	FinishesCommits() bool
}

// AppendCommitter is an optional capability of a backend, checked by type assertion: a ledger
// append and a step commit batch in one atomic write, the entries appended first. It answers
// like Append (the stored entries) and CommitSteps (one contract error per commit, a storage
// failure as err with nothing written). It blocks on I/O and is goroutine-safe.
type AppendCommitter interface {
	AppendAndCommitSteps(ctx context.Context, entries []*messages.LedgerEntry, commits []StepCommit) ([]*messages.LedgerEntry, []error, error)
}

// UsageMark names the attempt a commit's usage event meters within its execution (step id and
// attempt): backends store one usage event per execution and mark at most.
func UsageMark(c StepCommit) string {
	return c.Step.GetStepId() + "/" + strconv.Itoa(int(c.Step.GetAttempts()))
}

// Executions stores DAG executions and their step states under a fencing epoch.
type Executions interface {
	// CreateExecution stores a new execution (epoch as given, usually 1) or returns ErrExists.
	CreateExecution(ctx context.Context, e *messages.Execution) error
	// GetExecution returns the execution and all its committed step states (by step id order).
	GetExecution(ctx context.Context, id string) (*messages.Execution, []*messages.StepState, error)
	// AcquireExecution increments the epoch, sets owner and runtimeInstanceID, and returns the
	// new epoch. Every writer holding an older epoch is fenced from then on.
	AcquireExecution(ctx context.Context, id, owner, runtimeInstanceID string) (int64, error)
	// FenceExecution is AcquireExecution for recovery: it increments the epoch (owner set,
	// runtime instance cleared) only while the execution belongs to fromInstance or to no
	// instance, and returns the new epoch with fenced=true. When the execution already belongs
	// to another instance (a newer activation acquired it), it changes nothing and returns the
	// current epoch with fenced=false: a recovery working from an old view of the run cannot
	// fence the activation that replaced it.
	FenceExecution(ctx context.Context, id, owner, fromInstance string) (epoch int64, fenced bool, err error)
	// CommitSteps writes each commit if its epoch equals the execution's epoch and the step has
	// not already succeeded (a succeeded step is never overwritten, whatever the status of the
	// new write; the epoch is checked first), with its ledger entries and its usage event in
	// the same atomic write: a refused commit stores neither. errs[i] is nil, ErrStaleEpoch,
	// ErrAlreadyCommitted or ErrNotFound for commits[i]; err is a transport failure. Backends
	// pipeline or batch the commits.
	CommitSteps(ctx context.Context, commits []StepCommit) (errs []error, err error)
	// UpdateExecution applies fn to the execution if epoch is current (ErrStaleEpoch otherwise).
	UpdateExecution(ctx context.Context, id string, epoch int64, fn func(*messages.Execution) error) (*messages.Execution, error)
	// ListExecutionsByInstance returns non-terminal executions whose runtime instance is id.
	ListExecutionsByInstance(ctx context.Context, runtimeInstanceID string) ([]*messages.Execution, error)
}

// Ledger is the append-only history of each shared run.
type Ledger interface {
	// Append adds entries to the ledger of each entry's SharedRunId, assigning Seq (1, 2, ... per
	// run) and At when zero, and returns them with those set.
	Append(ctx context.Context, entries ...*messages.LedgerEntry) ([]*messages.LedgerEntry, error)
	// ReadLedger returns entries of a run with Seq > afterSeq in Seq order, at most limit
	// (0 means all).
	ReadLedger(ctx context.Context, sharedRunID string, afterSeq int64, limit int) ([]*messages.LedgerEntry, error)
}

// Tenants stores tenant settings.
type Tenants interface {
	PutTenant(ctx context.Context, t *messages.TenantSettings) error
	// GetTenant returns the settings or ErrNotFound.
	GetTenant(ctx context.Context, id string) (*messages.TenantSettings, error)
	ListTenants(ctx context.Context) ([]*messages.TenantSettings, error)
}

// ScaleOuts stores durable scale-out requests.
type ScaleOuts interface {
	CreateScaleOut(ctx context.Context, r *messages.ScaleOutRequest) error
	GetScaleOut(ctx context.Context, id string) (*messages.ScaleOutRequest, error)
	UpdateScaleOut(ctx context.Context, id string, fn func(*messages.ScaleOutRequest) error) (*messages.ScaleOutRequest, error)
	// ListScaleOuts returns requests in any of statuses (all when empty), oldest first.
	ListScaleOuts(ctx context.Context, statuses ...string) ([]*messages.ScaleOutRequest, error)
}

// Pipelines stores pipeline definitions by key and content hash.
type Pipelines interface {
	// PutPipeline stores a version and makes it the key's latest.
	PutPipeline(ctx context.Context, p *messages.PipelineVersion) error
	// GetPipeline returns the key's latest version, or the version with hash when hash != "".
	GetPipeline(ctx context.Context, key, hash string) (*messages.PipelineVersion, error)
	// ListPipelines returns the latest version of every key, by key.
	ListPipelines(ctx context.Context) ([]*messages.PipelineVersion, error)
}

// UsageFilter selects usage events.
type UsageFilter struct {
	TenantID string
	From, To time.Time // zero means unbounded
}

// Nanos returns f's window [from, to) in Unix nanoseconds, the unit of UsageEvent.At. A zero
// bound, or one past what int64 nanoseconds hold (before 1677-09-21 or after 2262-04-11, such
// as 9999-12-31), is no bound: math.MinInt64 or math.MaxInt64 (time.UnixNano is undefined
// there, and wrapped round to an empty window).
func (f UsageFilter) Nanos() (from, to int64) {
	from, to = math.MinInt64, math.MaxInt64
	if !f.From.IsZero() && f.From.After(minNanosTime) {
		from = f.From.UnixNano()
	}
	if !f.To.IsZero() && f.To.Before(maxNanosTime) {
		to = f.To.UnixNano()
	}
	return from, to
}

// The times int64 Unix nanoseconds can hold.
var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

// Usage stores metering events. Steps and runs are metered by the writes that commit them
// (StepCommit.Usage, UpdateRunAndMeter), never by a separate call.
type Usage interface {
	// AppendUsage stores events outside any fenced write (tools and tests); At is set to now
	// when zero. dair's runtime does not call it: usage it records must equal the ledger.
	AppendUsage(ctx context.Context, events ...*messages.UsageEvent) error
	// ListUsage returns the events of f.TenantID (every tenant when empty) with
	// From <= At < To, ordered by At.
	ListUsage(ctx context.Context, f UsageFilter) ([]*messages.UsageEvent, error)
}

// Leases are named, expiring locks for control-plane singletons.
type Leases interface {
	// AcquireLease takes or renews name for holder for ttl. It reports false when another holder
	// has a live lease.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease drops name if holder holds it.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// LeaseReader reads a lease without taking it: an optional capability of a backend, checked
// by type assertion. It blocks on I/O and is goroutine-safe.
type LeaseReader interface {
	// LeaseExpiry returns when name's lease lapses and who holds it, or the zero time and ""
	// when it is free (never taken, released, or lapsed by the store's clock).
	LeaseExpiry(ctx context.Context, name string) (until time.Time, holder string, err error)
}

// Requeue is one run of a Recovery batch: a run assigned to the lost instance From goes back to
// the shared queue, its execution fenced first.
type Requeue struct {
	// RunID is the run.
	RunID string
	// ExecutionID is its execution, fenced as FenceExecution(ExecutionID, Owner, From) does;
	// "" (or an execution that does not exist) fences nothing, at epoch 0.
	ExecutionID string
	// From is the lost instance: the execution is fenced only while it is on From or on none,
	// and the run's hold on From is released when it moves.
	From string
	// Owner is the fenced execution's owner.
	Owner string
	// Take is called with the run's current record before anything is written (possibly more
	// than once): it reports whether the run goes back to the queue, and may change it. Its
	// status is then set to queued.
	Take func(run *messages.SharedRun) bool
	// Entry returns the ledger entry written with the requeue, given the fence's epoch.
	Entry func(epoch int64) *messages.LedgerEntry
}

// RequeueResult is what a Recovery batch did with one Requeue.
type RequeueResult struct {
	// Epoch is the execution's epoch after the fence (0: no execution).
	Epoch int64
	// Fenced reports that the execution was fenced (or the run has none). When false, nothing
	// was written for this run: Take declined it, the run changed after Take saw it, or its
	// execution belongs to another instance (a newer activation took it).
	Fenced bool
	// Moved: the run went back to the queue (with its entry), its hold on From is released
	// and it is enqueued.
	Moved bool
	// Err is this run's failure; the batch's other runs went on.
	Err error
}

// Recovery is the batched recovery capability of a backend (an optional interface, checked by
// type assertion): the writes that move runs off a lost instance, for many runs in a few round
// trips. It blocks on I/O and is goroutine-safe.
type Recovery interface {
	// RequeueRuns does for each run of batch, independently, what FenceExecution,
	// UpdateRunAndAppend, ReleaseReservation and EnqueueFront do one after the other: it reads the
	// run and, when Take accepts it, fences its execution (only while the run is still as Take
	// saw it, so a fence never reaches an activation that took the run since, even on an
	// instance that reuses From's id), marks it queued with its entry appended in the same
	// write, releases its hold on From and enqueues it at the front (EnqueueFront). Every step is conditional, so a batch
	// that repeats or overlaps another recovery of the same runs moves each at most once.
	// results[i] is batch[i]'s. err is a failure of the call itself (the store is
	// unreachable): its runs may then be left at any step, fenced but not requeued included,
	// and another recovery must take them up.
	RequeueRuns(ctx context.Context, batch []Requeue) (results []RequeueResult, err error)
}

// TenantStates stores the lifecycle state of each tenant's runtime scope (last seen,
// scaled to zero, ensured).
type TenantStates interface {
	// PutTenantState upserts s (keyed by TenantId).
	PutTenantState(ctx context.Context, s *messages.TenantState) error
	// GetTenantState returns the state or ErrNotFound.
	GetTenantState(ctx context.Context, tenantID string) (*messages.TenantState, error)
}

// InstanceRecords stores the durable records of tenant-owned runtime instances. A record
// outlives the instance's registry entry (it is kept at 0 replicas after scale-to-zero).
type InstanceRecords interface {
	// PutInstanceRecord upserts r (keyed by RuntimeInstanceId). CreatedAt defaults to now.
	PutInstanceRecord(ctx context.Context, r *messages.InstanceRecord) error
	// GetInstanceRecord returns the record or ErrNotFound.
	GetInstanceRecord(ctx context.Context, id string) (*messages.InstanceRecord, error)
	// ListInstanceRecords returns the records of tenantID ordered by id; "" lists every record.
	ListInstanceRecords(ctx context.Context, tenantID string) ([]*messages.InstanceRecord, error)
	// DeleteInstanceRecord removes a record; deleting a missing id is not an error.
	DeleteInstanceRecord(ctx context.Context, id string) error
}

// CreatedRunVersion is the record version of a run that CreateRun has just stored (every
// later write of the run increments it).
const CreatedRunVersion int64 = 1

// NewRunVersion is the Assignment.Version of a run that does not exist yet: Assign creates it
// (at CreatedRunVersion, indexed like CreateRun, without an idempotency key) with the
// assignment, or creates nothing.
const NewRunVersion int64 = 0

// ClaimedRun is one claimed queue item with the run it names, read in the same call.
type ClaimedRun struct {
	Claim
	// Run is the run record, or nil when the run no longer exists.
	Run *messages.SharedRun
	// Version is Run's record version (see Assignment.Version).
	Version int64
}

// Assignment is one dispatch decision carried out by Assigner.Assign in one atomic write.
type Assignment struct {
	// Run is the run as it is to be stored: the caller's copy with the assignment applied
	// (status, instance, pump, attempts). It is not retained.
	Run *messages.SharedRun
	// Version is the record version the caller read Run at (ClaimedRun.Version, or
	// CreatedRunVersion for a run the caller just created). The write happens only while the
	// stored run is still at that version; NewRunVersion creates the run (RunChanged when its
	// id is taken; a run with an IdempotencyKey must be created by CreateRun).
	Version int64
	// InstanceID is the instance whose slot the run takes; Limit its slot count.
	InstanceID string
	// InstanceVersion is the registry version of the descriptor the decision was taken on
	// (ListInstanceVersions, DescriptorShape): the write happens only while the instance is
	// live and its descriptor still has that shape, so a decision on a view older than a
	// publication that paused, drained or resized the instance is refused (one that only
	// changed its load is not). 0 skips the check.
	InstanceVersion int64
	Limit           int
	// TTL bounds the slot hold until the instance refreshes it.
	TTL time.Duration
	// Ledger entries of the decision, appended to the run's ledger in the same write.
	Ledger []*messages.LedgerEntry
}

// AssignResult is what Assigner.Assign did.
type AssignResult int

const (
	// Assigned: the slot is held, the run written, its queue entry (pending or claimed by any
	// pump) removed and the ledger entries appended.
	Assigned AssignResult = iota
	// InstanceFull: the instance had no free slot; nothing was written.
	InstanceFull
	// RunChanged: the run was written since Version (or is gone); nothing was written.
	RunChanged
	// InstanceChanged: the instance's descriptor no longer has the shape InstanceVersion
	// names (or its entry expired); nothing was written.
	InstanceChanged
)

func (r AssignResult) String() string {
	switch r {
	case Assigned:
		return "assigned"
	case InstanceFull:
		return "instance-full"
	case RunChanged:
		return "run-changed"
	case InstanceChanged:
		return "instance-changed"
	}
	return "unknown"
}

// Assigner is the one-round-trip dispatch capability of a backend (an optional interface,
// checked by type assertion): a queue claim that returns the runs it claimed, and the
// dispatch decision's writes (capacity check, reservation, run assignment, queue removal and
// ledger entries) in one atomic call. Both methods block on I/O and are goroutine-safe.
type Assigner interface {
	// ClaimRuns is Queue.Claim that also returns each claimed run and its record version.
	ClaimRuns(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]ClaimedRun, error)
	// ListInstanceVersions is Registry.ListInstances with each descriptor's registry version
	// (versions[i] is insts[i]'s, its DescriptorShape).
	ListInstanceVersions(ctx context.Context) (insts []*messages.CapacityDescriptor, versions []int64, err error)
	// GetRunVersion returns a run and its record version, or ErrNotFound.
	GetRunVersion(ctx context.Context, id string) (*messages.SharedRun, int64, error)
	// Assign re-checks capacity and writes the assignment atomically: it holds a slot of
	// a.InstanceID (refused when a.Limit live holds exist: the sum of holds never exceeds the
	// limit, whatever the callers), stores a.Run if the stored run is still at a.Version, and
	// removes the run's queue entry. It returns what it did and the instance's live holds
	// after the call (its current load, for the caller's view).
	Assign(ctx context.Context, a Assignment) (res AssignResult, held int, err error)
}

// StartingAssigner is an Assigner that can also write a new run's execution start in the
// assignment's write (an optional interface, checked by type assertion). On the embedded
// store, where every write is a transaction with its fsyncs, it saves one of the two writes a
// new run needs before its first step may run.
type StartingAssigner interface {
	Assigner
	// AssignAndStart is Assign then, in the same atomic write and only when the run is
	// Assigned, ExecutionLifecycle.StartExecution(st): the run is written running, named by
	// st's execution (created at its Epoch), with st.Entry after a.Ledger. A refused start
	// (an error) refuses the assignment with it: nothing is written. The StartResult is
	// StartExecution's, zero unless Assigned.
	AssignAndStart(ctx context.Context, a Assignment, st ExecutionStart) (AssignResult, int, StartResult, error)
}
