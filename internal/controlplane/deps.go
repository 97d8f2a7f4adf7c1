package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// Errors of the control plane.
var (
	// ErrSuspended is returned by Lifecycle.Admit for a suspended tenant.
	ErrSuspended = errors.New("controlplane: tenant suspended")
	// ErrNoScopes is returned by Lifecycle methods that need the tenant scope actors on a node
	// that has none (no control-plane role).
	ErrNoScopes = errors.New("controlplane: no tenant scopes on this node")
	// errNotQueued aborts marking a run dispatched when it left the queue meanwhile.
	errNotQueued = errors.New("controlplane: run is no longer queued")
)

// NoCapacityError is returned by Lifecycle.Admit when a cold start got no ready capacity within
// its wait, retries included.
type NoCapacityError struct {
	TenantID string
	Wait     time.Duration
	Attempts int
}

func (e *NoCapacityError) Error() string {
	return fmt.Sprintf("controlplane: tenant %s: no ready capacity within %s (%d attempts)", e.TenantID, e.Wait, e.Attempts)
}

// Ledger records control-plane decisions in run ledgers; *ledger.Writer implements it. Both
// methods block on store I/O and are goroutine-safe.
type Ledger interface {
	// Record appends entries best-effort (failures are logged by the implementation).
	Record(ctx context.Context, entries ...*messages.LedgerEntry)
	// FinishRun updates run id with fn and, when fn reports a change, appends entry in the same
	// write. It returns the stored run and whether fn changed it.
	FinishRun(ctx context.Context, id string, entry *messages.LedgerEntry, fn func(*messages.SharedRun) bool) (*messages.SharedRun, bool, error)
}

// AsyncLedger is an optional capability of a Ledger: RecordAsync hands entries to the writer
// and returns without waiting for them to be durable (in order with the run's other writes).
// *ledger.Writer implements it.
type AsyncLedger interface {
	RecordAsync(ctx context.Context, entries ...*messages.LedgerEntry)
}

// recordOutcome records entries nothing waits on: without waiting when the ledger can.
func (d *Dispatcher) recordOutcome(ctx context.Context, entries ...*messages.LedgerEntry) {
	if a, ok := d.cfg.Ledger.(AsyncLedger); ok {
		a.RecordAsync(ctx, entries...)
		return
	}
	d.cfg.Ledger.Record(ctx, entries...)
}

// Group starts tracked goroutines; *workgroup.Group implements it. Go runs fn with the group's
// stop context and reports false, running nothing, once the group is stopping.
type Group interface {
	Go(fn func(ctx context.Context)) bool
}

// Prestarter prepares, for the assignment of a new run to an instance of this process, the
// start of the run's execution, so that the assignment's write carries it
// (store.StartingAssigner) and the instance runs the first step without a write of its own.
// The actors layer implements it. Both methods are goroutine-safe and do no I/O.
type Prestarter interface {
	// Prestart returns the start of run's execution on instanceID (a new execution at epoch
	// 1, its local run id, the start's ledger entry) and reports false when the instance is
	// not this process's, or its start is not to be prepared. The run must not have an
	// execution yet. Once the start is written, a delivery of run naming the execution is
	// taken by the instance as started; forget drops the preparation (called once the
	// delivery answered, or when the assignment was not written).
	Prestart(run *messages.SharedRun, instanceID string) (st store.ExecutionStart, forget func(), ok bool)
	// Started tells of the start written with an assignment (res as the store answered).
	Started(run *messages.SharedRun, res store.StartResult)
	// Gate holds the first step of run's activation on instanceID, when the instance is this
	// process's, until open is called: the dispatcher opens it once it handed the delivery's
	// outcome entry to the ledger, so that the entry precedes every step record of the run
	// (the committer writes a run's records in the order they were handed to it). open must
	// be called once; it is a no-op for an instance of another process.
	Gate(run *messages.SharedRun, instanceID string) (open func())
}

// DispatchRouter delivers a run to an instance through its provider; *providers.Registry
// implements it. Dispatch blocks until the provider answers and never returns nil.
type DispatchRouter interface {
	Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult
}

// ScaleOutRouter creates capacity through the scale-out provider selected by the request's
// hint, then defaultName; *providers.Registry implements it. ScaleOut blocks until the capacity
// is ready or refused.
type ScaleOutRouter interface {
	ScaleOut(ctx context.Context, req *messages.ScaleOutRequest, defaultName string) providers.ScaleOutResult
}

// ControlRouter sends a control op to an instance through its provider; *providers.Registry
// implements it. Control blocks until the provider answers and never returns nil.
type ControlRouter interface {
	Control(ctx context.Context, d *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult
}

// PipelineWidths tells the widest level of a pipeline version (how many steps may run at
// once). It blocks on store I/O for a version not cached yet.
type PipelineWidths interface {
	Width(ctx context.Context, key, hash string) (int, error)
}

// PumpID is the PumpRuntimeInstanceId (and queue claim owner) of a node's shared-queue pump.
func PumpID(nodeID string) string { return "pump-" + nodeID }

// jsonOrNil returns v as JSON, or nil when v cannot be encoded (ledger data is best-effort).
func jsonOrNil(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func nowFunc(f func() time.Time) func() time.Time {
	if f == nil {
		return time.Now
	}
	return f
}

func defaultDuration(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// find returns the descriptor of id in insts, or nil.
func find(insts []*messages.CapacityDescriptor, id string) *messages.CapacityDescriptor {
	for _, d := range insts {
		if d.RuntimeInstanceId == id {
			return d
		}
	}
	return nil
}

// detached returns a context for cleanup that must outlive ctx's cancellation (releasing a
// slot after a failed dispatch), bounded by d.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
