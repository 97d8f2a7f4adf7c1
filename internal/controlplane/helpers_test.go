package controlplane_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openStore opens a fresh embedded store for t.
func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// group returns a worker group stopped at the end of t.
func group(t *testing.T) *workgroup.Group {
	t.Helper()
	g := workgroup.New()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, g.Stop(ctx))
	})
	return g
}

// router is a provider router that answers every operation from its fields and records the
// requests it got.
type router struct {
	mu        sync.Mutex // guards the fields below
	ok        bool
	retryable bool
	reason    string
	created   []string // instance ids a scale-out reports
	dispatch  []*messages.DispatchRequest
	control   []*messages.ControlRequest
	scaleOuts []*messages.ScaleOutRequest
}

func (r *router) result(op string) *messages.ProviderResult {
	return &messages.ProviderResult{Provider: "fake", Op: op, Ok: r.ok, Reason: r.reason, Retryable: r.retryable}
}

func (r *router) Dispatch(_ context.Context, _ *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dispatch = append(r.dispatch, req)
	res := r.result("dispatch")
	res.LocalRunId = "lrun-1"
	return res
}

func (r *router) Control(_ context.Context, _ *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.control = append(r.control, req)
	return &messages.ProviderResult{Provider: "fake", Op: req.Op, Ok: true}
}

func (r *router) ScaleOut(_ context.Context, req *messages.ScaleOutRequest, _ string) providers.ScaleOutResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scaleOuts = append(r.scaleOuts, req)
	return providers.ScaleOutResult{Result: r.result("scale-out"), InstanceIDs: r.created}
}

// plane is the control-plane services over one store, wired like a node wires them.
type plane struct {
	st         store.Store
	router     *router
	tenants    *controlplane.Tenants
	scaler     *controlplane.Scaler
	dispatcher *controlplane.Dispatcher
	recoverer  *controlplane.Recoverer
	created    []string // scale-out request ids, in order
	mu         sync.Mutex
}

func newPlane(t *testing.T, st store.Store) *plane {
	t.Helper()
	return newPlaneAs(t, st, "cp-1")
}

// newPlaneAs is newPlane for a control plane of incarnation (its leases' holder).
func newPlaneAs(t *testing.T, st store.Store, incarnation string) *plane {
	t.Helper()
	p := &plane{st: st, router: &router{ok: true}}
	w := ledger.NewWriter(st, ledger.WriterConfig{})
	p.tenants = controlplane.NewTenants(st, controlplane.TenantsConfig{})
	var err error
	p.scaler, err = controlplane.NewScaler(st, controlplane.ScalerConfig{Holder: incarnation, Router: p.router, Ledger: w, Tenants: p.tenants,
		Group: group(t), OnCreated: func(id string) { p.mu.Lock(); p.created = append(p.created, id); p.mu.Unlock() }})
	require.NoError(t, err)
	p.dispatcher, err = controlplane.NewDispatcher(st, controlplane.DispatcherConfig{ReservationTTL: time.Minute, Router: p.router, Ledger: w,
		Tenants: p.tenants, Scaler: p.scaler})
	require.NoError(t, err)
	p.recoverer, err = controlplane.NewRecoverer(st, controlplane.RecovererConfig{NodeID: "cp", Incarnation: incarnation, Ledger: w,
		HeartbeatInterval: time.Millisecond, ReservationTTL: time.Minute})
	require.NoError(t, err)
	return p
}

func (p *plane) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.created...)
}

// ready is a live, idle runtime instance of tenant's dedicated scope (shared when tenant is "").
func ready(id, tenant string, slots int32) *messages.CapacityDescriptor {
	d := &messages.CapacityDescriptor{RuntimeInstanceId: id, Status: messages.InstanceReady, WorkerCount: 4, AvailableWorkerCount: 4,
		MaxConcurrentRuns: slots, AvailableRunSlots: slots, QueueCapacity: 10, CanAcceptRun: true, IsolationMode: messages.IsolationShared,
		RuntimeInstanceIdPrefix: "runtime-instance", MaxRuntimeInstances: 4, LastHeartbeatAt: time.Now().UnixNano(), Roles: []string{"runtime"}}
	if tenant != "" {
		d.TenantId, d.IsolationMode, d.RuntimeInstanceIdPrefix, d.MaxRuntimeInstances = tenant, messages.IsolationDedicated, tenant+"-runtime", 1
	}
	return d
}

func dedicated(tenant string) *messages.TenantSettings {
	return &messages.TenantSettings{TenantId: tenant, IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: tenant + "-runtime",
		MaxRuntimeInstances: 1, WorkerCountPerInstance: 4, MaxConcurrentRunsPerInstance: 1, LocalQueueCapacity: 10}
}

// queued stores a queued run of tenant and puts it in the shared queue.
func queued(t *testing.T, st store.Store, id, tenant string) *messages.SharedRun {
	t.Helper()
	ctx := testCtx(t)
	run := &messages.SharedRun{SharedRunId: id, TenantId: tenant, Status: messages.RunQueued, Pipeline: "p",
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: tenant}}
	_, _, err := st.CreateRun(ctx, run)
	require.NoError(t, err)
	require.NoError(t, st.Enqueue(ctx, id))
	return run
}

func kinds(t *testing.T, st store.Store, runID string) []string {
	t.Helper()
	entries, err := st.ReadLedger(testCtx(t), runID, 0, 0)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Kind)
	}
	return out
}
