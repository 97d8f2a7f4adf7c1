package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// env is what every actor of a node shares: the store, the committer, handlers, pipelines,
// the local instance directory and timing settings. Its fields are set once at node start;
// the pieces it points to are goroutine-safe.
type env struct {
	nodeID      string
	incarnation string // the actor system id: unique per process start
	system      *actor.ActorSystem
	st          store.Store
	log         *zap.Logger
	hub         *Hub
	awaits      *runWatch // Node.Await's batched store reads (await.go)
	commits     *committer
	history     *ledger.Writer
	// life is the store's one-call start and end of an execution, or nil when the store has
	// none (the execution then writes them in several calls).
	life store.ExecutionLifecycle
	// foldsFinish reports that the store writes a run's finish with its last step's commit
	// (store.CommitFinisher over the store the committer writes to): executions then hand the
	// two to the committer as one write.
	foldsFinish bool
	handlers    *step.Registry
	pipelines   *pipelineCache
	dir         *directory
	// prestarts are the executions the dispatcher starts with their runs' assignments
	// (prestart.go).
	prestarts *prestarts
	metrics   nodeMetrics
	pub       *publisher
	cfg       Config
	now       func() time.Time
	// group owns the node's background goroutines and timers (and the committer and publisher
	// loops); Node.Stop cancels it and waits for them.
	group *workgroup.Group
	// dead is set once the cluster declared this incarnation dead: its runs belong to others.
	dead atomic.Bool
	// lost holds the ids of the members this node declared lost (member id → true): scale-out
	// places nothing on them while memberlist still lists them.
	lost sync.Map
	// agentNode is the node once its agent runtime has started (agent_steps.go).
	agentNode atomic.Pointer[Node]
	// mailboxes runs the mailboxes of the instances and executions on parked goroutines of
	// group (agent_dispatch.go): protoactor's default dispatcher starts a goroutine per mailbox
	// run, whose stack then grows again on every run (a seventh of a step commit's CPU).
	mailboxes *agentDispatcher
	// steps runs the step tasks on parked goroutines of group, apart from the mailboxes: a step
	// that sleeps or waits (most of the 100k in flight of BenchmarkInFlightMemory) then holds a
	// goroutine whose stack only ever ran step handlers, not one grown by mailbox runs (8 KB
	// against 4 KB per in-flight execution).
	steps *agentDispatcher
}

// ledger appends entries (batched with other runs' writes by the committer, in order per run)
// and wakes local waiters. It blocks until the entries are durable or ctx ends; failures are
// logged (see ledger.Writer.Record).
func (e *env) ledger(ctx context.Context, entries ...*messages.LedgerEntry) {
	e.history.Record(ctx, entries...)
}

// finishRun updates run id with fn and, when fn reports that it changed the run, appends entry
// to the run's ledger in the same store write (a terminal status never exists without its
// terminal entry). It returns the stored run and whether fn changed it.
func (e *env) finishRun(ctx context.Context, id string, entry *messages.LedgerEntry, fn func(r *messages.SharedRun) bool) (*messages.SharedRun, bool, error) {
	return e.history.FinishRun(ctx, id, entry, fn)
}

// goCleanup runs fn on a goroutine of the node's group with a context that the node's stop
// does not cancel, bounded by d: work that must finish even while the node stops (releasing
// the slots of a stopped instance, failing a crashed execution). Stop waits for it.
func (e *env) goCleanup(d time.Duration, fn func(ctx context.Context)) {
	e.group.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		defer cancel()
		fn(ctx)
	})
}

// tick sends msg to pid every d from the node's group until the returned function is called
// (by the owning actor, on Stopping or Restarting) or the node stops.
func (e *env) tick(pid *actor.PID, d time.Duration, msg any) (stop func()) {
	return e.group.Tick(d, func() { e.system.Root.Send(pid, msg) })
}

// directory maps local runtime instance ids to their PIDs (the local provider's Directory).
type directory struct {
	mu sync.RWMutex // guards m
	m  map[string]*actor.PID
}

func newDirectory() *directory { return &directory{m: make(map[string]*actor.PID)} }

// Lookup returns the PID of a local instance.
func (d *directory) Lookup(id string) (*actor.PID, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, ok := d.m[id]
	return p, ok
}

func (d *directory) put(id string, pid *actor.PID) {
	d.mu.Lock()
	d.m[id] = pid
	d.mu.Unlock()
}

func (d *directory) remove(id string, pid *actor.PID) {
	d.mu.Lock()
	if cur, ok := d.m[id]; ok && cur.Equal(pid) {
		delete(d.m, id)
	}
	d.mu.Unlock()
}

func (d *directory) ids() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.m))
	for id := range d.m {
		out = append(out, id)
	}
	return out
}
