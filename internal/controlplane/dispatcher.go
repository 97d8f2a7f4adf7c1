package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/admission"
	"github.com/dairuntime/dair/internal/metrics"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Outcome tells the pump what to do with a claimed queue item after one dispatch attempt.
type Outcome int

const (
	// Done: dispatched, parked for scale-out, rejected or already final. The claim is acked.
	Done Outcome = iota
	// Requeue: the run stays queued (no capacity yet, dispatch failed). The claim is released.
	Requeue
)

func (o Outcome) String() string {
	if o == Done {
		return "done"
	}
	return "requeue"
}

// ReasonNoFreeSlot is the wait reason of a run whose chosen instances were all full.
const ReasonNoFreeSlot = "no-free-slot"

// DispatcherStore is the state the dispatcher reads and writes.
type DispatcherStore interface {
	store.Runs
	store.Queue
	store.Registry
	store.Reservations
}

// DispatcherConfig configures a Dispatcher. The zero value of each tunable means its default;
// the collaborators marked required must be set.
type DispatcherConfig struct {
	// Batch is the claim size of one pump cycle. Default 128.
	Batch int
	// Parallelism bounds concurrent dispatches of one cycle. Default 32.
	Parallelism int
	// QueueVisibility is how long a claim hides a queue item. Default 30s.
	QueueVisibility time.Duration
	// ReservationTTL bounds a slot hold until the instance refreshes it. Default 30s.
	ReservationTTL time.Duration
	// HeartbeatTTL is the heartbeat staleness bound admission applies. Default 5s.
	HeartbeatTTL time.Duration
	// ViewTTL bounds the staleness of the instance view (registry and reservation counts) the
	// fast path decides on; the store re-checks capacity when it reserves. Default 100ms.
	ViewTTL time.Duration
	// MaxAttempts bounds how often a run may fail provider dispatch before it fails. Default 20.
	MaxAttempts int
	// Router delivers runs to instances. Required.
	Router DispatchRouter
	// Ledger records decisions. Required.
	Ledger Ledger
	// Tenants resolves tenant settings. Required.
	Tenants *Tenants
	// Scaler parks runs that need capacity. Required.
	Scaler *Scaler
	// Circuits is the dispatch breaker (shared with the reconciler). Default: a new one.
	Circuits *Circuits
	// Members, when set, returns the ids (actor system ids) of the live cluster members:
	// instances published by any other member are marked unhealthy. Optional.
	Members func() []string
	// Pipelines gives the width sent with a dispatch (MaxParallelism). Optional.
	Pipelines PipelineWidths
	// Prestarter, over a store.StartingAssigner, prepares the start of a run's execution on an
	// instance of this process, written with the run's assignment (see fastpath.go).
	// Optional.
	Prestarter Prestarter
	// Metrics, Log and Now default to none, no logging and time.Now.
	Metrics *metrics.Metrics
	Log     *zap.Logger
	Now     func() time.Time
}

// Validate reports a missing required collaborator.
func (c DispatcherConfig) Validate() error {
	if c.Router == nil || c.Ledger == nil || c.Tenants == nil || c.Scaler == nil {
		return errors.New("controlplane: dispatcher config: Router, Ledger, Tenants and Scaler are required")
	}
	return nil
}

func (c DispatcherConfig) withDefaults() DispatcherConfig {
	if c.Batch <= 0 {
		c.Batch = 128
	}
	if c.Parallelism <= 0 {
		c.Parallelism = 32
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 20
	}
	defaultDuration(&c.QueueVisibility, 30*time.Second)
	defaultDuration(&c.ReservationTTL, 30*time.Second)
	defaultDuration(&c.HeartbeatTTL, 5*time.Second)
	defaultDuration(&c.ViewTTL, 100*time.Millisecond)
	if c.Circuits == nil {
		c.Circuits = NewCircuits()
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	c.Now = nowFunc(c.Now)
	return c
}

// Dispatcher moves queued shared runs to runtime instances: it claims a batch from the shared
// queue (a pump cycle), restores each run's snapshot and tenant settings, asks admission,
// reserves a slot atomically, marks the run dispatched and delivers it through the provider
// router, recording every decision in the run's ledger. It is goroutine-safe: all its state is
// in the store (and the circuit breaker). Its methods block on store and provider I/O.
type Dispatcher struct {
	st  DispatcherStore
	cfg DispatcherConfig
	asg store.Assigner // st's one-call dispatch capability, or nil (see fastpath.go)
	// starter is st's assign-and-start capability, or nil (also without a Prestarter).
	starter store.StartingAssigner
	view    *instanceView
	// inflight counts the slots of dispatches whose hold is being written (inflight.go).
	inflight *inflight
	// waiting is set when the last cycle left claimed runs queued: no hand-off overtakes them.
	waiting atomic.Bool
	// fair is nil over a store without per-tenant queues (see FairStore).
	fair *fairness
}

// NewDispatcher returns a dispatcher over st.
func NewDispatcher(st DispatcherStore, cfg DispatcherConfig) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{st: st, cfg: cfg.withDefaults(), inflight: newInflight()}
	if fs, ok := st.(FairStore); ok {
		d.fair = &fairness{st: fs}
	}
	if asg, ok := st.(store.Assigner); ok {
		d.asg = asg
		d.view = newInstanceView(struct {
			store.Assigner
			store.Reservations
		}{asg, st}, d.cfg.ViewTTL, d.cfg.Now)
	}
	if sa, ok := st.(store.StartingAssigner); ok && d.cfg.Prestarter != nil {
		d.starter = sa
	}
	return d, nil
}

// Cycle claims one batch for pumpID and dispatches it with bounded parallelism (it returns
// once every dispatch of the batch has). It returns the number of items claimed and how many
// of them left the queue (dispatched, parked or final).
func (d *Dispatcher) Cycle(ctx context.Context, pumpID string) (claimed, settled int, err error) {
	fast, err := d.fastCycle(ctx)
	if err != nil {
		d.cfg.Log.Warn("read tenant backlog", zap.String("pump_runtime_instance_id", pumpID), zap.Error(err))
		return 0, 0, err
	}
	if fast {
		return d.cycleFast(ctx, pumpID)
	}
	claims, err := d.claim(ctx, pumpID)
	if err != nil {
		d.cfg.Log.Warn("claim shared queue", zap.String("pump_runtime_instance_id", pumpID), zap.Error(err))
		return 0, 0, err
	}
	defer d.queueDepth(ctx)
	if len(claims) == 0 {
		return 0, 0, nil
	}
	insts, err := d.st.ListInstances(ctx)
	if err != nil {
		d.cfg.Log.Warn("list instances", zap.Error(err))
		for _, cl := range claims {
			if err := d.st.Release(ctx, cl); err != nil {
				d.cfg.Log.Warn("release claim", zap.String("shared_run_id", cl.RunID), zap.Error(err))
			}
		}
		return len(claims), 0, err
	}
	var done atomic.Int64
	sem := make(chan struct{}, d.cfg.Parallelism)
	var wg sync.WaitGroup
	ts := turns(len(claims)) // the runs decide in claim (fair plan) order
	for i, cl := range claims {
		tn := ts[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() { // joined by wg.Wait below
			defer func() { <-sem; wg.Done() }()
			defer tn.pass()
			if d.settle(ctx, cl, pumpID, insts, tn) == Done {
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	d.waiting.Store(int(done.Load()) < len(claims) || d.Backlogged())
	return len(claims), int(done.Load()), nil
}

// settle dispatches one claimed run and acks or releases its claim.
func (d *Dispatcher) settle(ctx context.Context, cl store.Claim, pumpID string, insts []*messages.CapacityDescriptor, tn *turn) Outcome {
	out, err := d.dispatchRun(ctx, cl.RunID, pumpID, insts, tn)
	if err != nil {
		d.cfg.Log.Warn("dispatch run", zap.String("shared_run_id", cl.RunID), zap.Error(err))
	}
	if out == Done {
		err = d.st.Ack(ctx, cl)
	} else {
		err = d.st.Release(ctx, cl)
	}
	if err != nil {
		d.cfg.Log.Warn("settle queue claim", zap.String("shared_run_id", cl.RunID), zap.Error(err))
	}
	return out
}

func (d *Dispatcher) queueDepth(ctx context.Context) {
	if p, cl, err := d.st.QueueDepth(ctx); err == nil {
		d.cfg.Metrics.Queue(p, cl)
	}
}

// DispatchRun runs admission for one queued run and carries out the decision. insts is the
// registry snapshot to decide on (a pump cycle reads it once for its whole batch); nil reads it.
func (d *Dispatcher) DispatchRun(ctx context.Context, runID, pumpID string, insts []*messages.CapacityDescriptor) (Outcome, error) {
	return d.dispatchRun(ctx, runID, pumpID, insts, nil)
}

// dispatchRun is DispatchRun deciding in turn tn (nil: at once).
func (d *Dispatcher) dispatchRun(ctx context.Context, runID, pumpID string, insts []*messages.CapacityDescriptor, tn *turn) (Outcome, error) {
	defer tn.pass()
	run, err := d.st.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return Done, nil
	}
	if err != nil {
		return Requeue, fmt.Errorf("load run %s: %w", runID, err)
	}
	if run.Status != messages.RunQueued {
		return Done, nil // already dispatched, parked or final: a stale queue entry
	}
	snap := run.Snapshot
	if snap == nil || snap.TenantId == "" {
		return Done, d.reject(ctx, run, "missing-execution-context")
	}
	t, err := d.cfg.Tenants.Get(ctx, snap.TenantId)
	if err != nil {
		return Requeue, err
	}
	if insts == nil {
		if insts, err = d.st.ListInstances(ctx); err != nil {
			return Requeue, fmt.Errorf("list instances: %w", err)
		}
	}
	insts = d.cfg.Circuits.Overlay(insts, d.cfg.Now())
	if d.cfg.Members != nil {
		insts = MemberOverlay(insts, d.cfg.Members())
	}
	reserved := make(map[string]int)
	for _, x := range tenancy.FilterVisible(insts, snap.TenantId, snap.TenantGroupId, t) {
		n, err := d.st.ReservationCount(ctx, x.RuntimeInstanceId)
		if err != nil {
			return Requeue, fmt.Errorf("count reservations: %w", err)
		}
		reserved[x.RuntimeInstanceId] = n
	}
	tn.wait(ctx)
	if reason, ok := tn.blocked(snap.TenantId); ok {
		// A run of the tenant ahead of this one waits: this one waits behind it.
		d.wait(ctx, run, reason, admissionEntry(run, admission.Decision{Kind: admission.QueueGlobally, Reason: reason}))
		return Requeue, nil
	}
	return d.admit(ctx, run, t, insts, reserved, pumpID, tn)
}

// admit asks admission and carries out its decision; a reservation refused on a full instance
// (another dispatch took the last slot since the count was read) asks again, up to 3 times.
// A run that keeps waiting is recorded once per wait reason, not on every pump cycle (where
// "every chosen instance was full" is one reason, whatever admission said after it).
func (d *Dispatcher) admit(ctx context.Context, run *messages.SharedRun, t *messages.TenantSettings, insts []*messages.CapacityDescriptor,
	held map[string]int, pumpID string, tn *turn) (Outcome, error) {
	reserved := maps.Clone(held)
	d.inflight.add(reserved) // held is the store's counts; decisions also count the slots in flight
	in := admission.Input{Snapshot: run.Snapshot, Tenant: t, Instances: insts, Reserved: reserved, HeartbeatTimeout: d.cfg.HeartbeatTTL,
		Contended: d.contended(run.GetSnapshot().GetTenantId())}
	pendingKnown := false
	var full []*messages.LedgerEntry // refused reservations, recorded with the last decision
	busyWaits := 0
	for try := 0; try < 3; try++ {
		in.Now = d.cfg.Now()
		dec := admission.Decide(in)
		if dec.Kind == admission.RequestScaleOut && !pendingKnown {
			// Pending scale-outs matter only when admission wants more capacity: read them then.
			n, failing, err := d.cfg.Scaler.PendingOrFailing(ctx, t)
			if err != nil {
				return Requeue, err
			}
			in.PendingScaleOuts, in.ScaleOutFailing, pendingKnown = n, failing, true
			dec = admission.Decide(in)
		}
		admitted := admissionEntry(run, dec)
		d.cfg.Metrics.Admission(dec.Kind.String(), dec.Reason)
		if dec.Kind != admission.AssignToInstance && dec.Kind != admission.QueueGlobally {
			tn.pass() // the next run's decision need not wait for this one's park or rejection
		}
		switch dec.Kind {
		case admission.AssignToInstance:
			x := find(insts, dec.InstanceID)
			release, busy, ok := d.inflight.take(x, held[x.RuntimeInstanceId])
			if !ok {
				if busy != nil && busyWaits < maxBusyWaits && awaitBusy(ctx, busy) {
					// A dispatch in flight is taking the slot: once it answered, decide again
					// on the instance's fresh count (this wait is not a try).
					busyWaits++
					n, err := d.st.ReservationCount(ctx, x.RuntimeInstanceId)
					if err != nil {
						return Requeue, fmt.Errorf("count reservations: %w", err)
					}
					held[x.RuntimeInstanceId] = n
					reserved[x.RuntimeInstanceId] = n + d.inflight.count(x.RuntimeInstanceId)
					try--
					continue
				}
				reserved[x.RuntimeInstanceId] = int(x.MaxConcurrentRuns)
				continue
			}
			if !quotaBound(t) {
				tn.pass()
			}
			// A quota-bound tenant's next run decides once this hold answered: the quota's
			// count is only known from the store's answer, and runs deciding on stale counts
			// would take (and lose) the instance's slots meanwhile.
			reservation, hold, err := d.reserve(ctx, run, t, x)
			release()
			if err != nil {
				return Requeue, err
			}
			if hold == slotHeld {
				tn.pass()
			}
			switch hold {
			case slotTenantFull: // the next decision waits for the tenant's quota
				in.TenantActive = int(t.MaxConcurrentRuns)
				continue
			case slotRateLimited:
				in.RateLimited = true
				continue
			case slotFull:
				// The instance is full (not gone): the next decision sees it without a free slot.
				full = append(full, admitted, reservation)
				reserved[x.RuntimeInstanceId] = int(x.MaxConcurrentRuns)
				continue
			}
			return d.deliver(ctx, run, x, pumpID, append(full, admitted, reservation)...)
		case admission.QueueGlobally:
			reason := dec.Reason
			if len(full) > 0 && !quotaWait(reason) {
				reason = d.fullReason(run)
			}
			tn.block(run.GetSnapshot().GetTenantId(), reason) // the tenant's later runs wait behind this one
			d.wait(ctx, run, reason, append(full, admitted)...)
			return Requeue, nil
		case admission.RequestScaleOut:
			d.cfg.Ledger.Record(ctx, append(full, admitted)...)
			return Done, d.cfg.Scaler.ParkRun(ctx, run, t, dec.Reason)
		default:
			d.cfg.Ledger.Record(ctx, append(full, admitted)...)
			return Done, d.reject(ctx, run, dec.Reason)
		}
	}
	tn.block(run.GetSnapshot().GetTenantId(), d.fullReason(run))
	d.wait(ctx, run, d.fullReason(run), full...)
	return Requeue, nil
}

// reserve holds a slot of x (and of t's quotas) for run and returns the ledger record of the
// attempt and its outcome (slotHeld, slotFull, slotTenantFull or slotRateLimited).
func (d *Dispatcher) reserve(ctx context.Context, run *messages.SharedRun, t *messages.TenantSettings, x *messages.CapacityDescriptor) (*messages.LedgerEntry, int, error) {
	held, err := d.holdSlot(ctx, run, t, x)
	if err != nil {
		return nil, slotFull, fmt.Errorf("reserve %s: %w", x.RuntimeInstanceId, err)
	}
	reason := "reserved"
	if held != slotHeld {
		reason = ReasonNoFreeSlot
	}
	return reservationEntry(run, x, reason), held, nil
}

// reservationEntry is the ledger record of a reservation attempt of run on x.
func reservationEntry(run *messages.SharedRun, x *messages.CapacityDescriptor, reason string) *messages.LedgerEntry {
	return &messages.LedgerEntry{Kind: messages.KindReservation, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		RuntimeInstanceId: x.RuntimeInstanceId, TenantId: run.GetSnapshot().GetTenantId(), Reason: reason}
}

// admissionEntry is the ledger record of a decision (listing only candidates the tenant may
// see: other tenants' instance ids never reach a tenant's ledger).
func admissionEntry(run *messages.SharedRun, dec admission.Decision) *messages.LedgerEntry {
	var seen []admissionCandidate
	for _, cd := range dec.Considered {
		if cd.Visible {
			seen = append(seen, admissionCandidate{Eligible: cd.Eligible, Reason: cd.Reason, RuntimeInstanceID: cd.InstanceID})
		}
	}
	return &messages.LedgerEntry{Kind: messages.KindAdmission, SharedRunId: run.SharedRunId, ExecutionId: run.ExecutionId,
		RuntimeInstanceId: dec.InstanceID, TenantId: run.GetSnapshot().GetTenantId(), Reason: dec.Reason,
		Data: jsonOrNil(admissionData{Candidates: seen, Decision: dec.Kind.String(), Fallback: dec.Fallback})}
}

// admissionData is the data of an admission entry; its fields, and a candidate's, are in the
// order of their names, as the maps they replace encoded them.
type admissionData struct {
	Candidates []admissionCandidate `json:"candidates"`
	Decision   string               `json:"decision"`
	Fallback   bool                 `json:"fallback"`
}

type admissionCandidate struct {
	Eligible          bool   `json:"eligible"`
	Reason            string `json:"reason"`
	RuntimeInstanceID string `json:"runtime_instance_id"`
}
