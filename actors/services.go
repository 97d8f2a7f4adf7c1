package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/controlplane"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/providers"
)

// The node's pieces satisfy the services' consumer interfaces.
var (
	_ controlplane.Ledger         = (*ledger.Writer)(nil)
	_ controlplane.AsyncLedger    = (*ledger.Writer)(nil)
	_ controlplane.Notifier       = (*ledger.Writer)(nil)
	_ controlplane.PipelineWidths = (*pipelineCache)(nil)
	_ controlplane.DispatchRouter = (*providers.Registry)(nil)
	_ controlplane.ScaleOutRouter = (*providers.Registry)(nil)
	_ controlplane.ControlRouter  = (*providers.Registry)(nil)
	_ controlplane.Group          = (*workgroup.Group)(nil)
	_ ledger.Notifier             = (*Hub)(nil)
)

// scaleOutLeaseTTL is how long the owner of a scale-out request holds it without renewal.
const scaleOutLeaseTTL = 6 * time.Second

// plane is the node's control-plane services (internal/controlplane), shared by its actors and
// its API. Every service is goroutine-safe.
type plane struct {
	tenants    *controlplane.Tenants
	circuits   *controlplane.Circuits
	scaler     *controlplane.Scaler
	dispatcher *controlplane.Dispatcher
	recoverer  *controlplane.Recoverer
	reconciler *controlplane.Reconciler
	lifecycle  *controlplane.Lifecycle
	scopes     *scopeRef
	pids       *controlPIDs
	pumpID     string
}

// controlPIDs are the control-plane actors the services wake: the pump and the scale-out
// supervisor. The control plane actor publishes them when it starts.
type controlPIDs struct {
	sys      *actor.ActorSystem
	mu       sync.Mutex // guards pump, scaleOut
	pump     *actor.PID
	scaleOut *actor.PID
}

func (p *controlPIDs) set(pump, scaleOut *actor.PID) {
	p.mu.Lock()
	p.pump, p.scaleOut = pump, scaleOut
	p.mu.Unlock()
}

func (p *controlPIDs) get() (pump, scaleOut *actor.PID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pump, p.scaleOut
}

// wakePump asks the pump for a cycle now (a run was enqueued). It does not block.
func (p *controlPIDs) wakePump() {
	if pump, _ := p.get(); pump != nil {
		p.sys.Root.Send(pump, &pumpWake{})
	}
}

// scaleOutCreated tells the scale-out supervisor about a new request. It does not block.
func (p *controlPIDs) scaleOutCreated(id string) {
	if _, so := p.get(); so != nil {
		p.sys.Root.Send(so, &scaleOutCreated{id: id})
	}
}

// newPlane builds the control-plane services of a node over e and its provider registry.
func newPlane(e *env, reg *providers.Registry) (*plane, error) {
	cfg := e.cfg
	pl := &plane{tenants: controlplane.NewTenants(e.st, controlplane.TenantsConfig{}), circuits: controlplane.NewCircuits(),
		scopes: &scopeRef{sys: e.system}, pids: &controlPIDs{sys: e.system}, pumpID: controlplane.PumpID(e.nodeID)}
	var err error
	if pl.scaler, err = controlplane.NewScaler(e.st, controlplane.ScalerConfig{Holder: e.incarnation, ControlPlaneID: cfg.ControlPlaneID,
		Provider: cfg.ScaleOutProvider, Cooldown: cfg.ScaleOutCooldown, LeaseTTL: scaleOutLeaseTTL, Router: reg, Ledger: e.history,
		Tenants: pl.tenants, Group: e.group, OnCreated: pl.pids.scaleOutCreated, OnRequeued: pl.pids.wakePump,
		Metrics: e.metrics.Metrics, Log: e.log, Now: e.now}); err != nil {
		return nil, err
	}
	dcfg := controlplane.DispatcherConfig{Batch: cfg.PumpBatch, Parallelism: cfg.PumpParallelism, QueueVisibility: cfg.QueueVisibility,
		ReservationTTL: cfg.ReservationTTL, HeartbeatTTL: cfg.HeartbeatTTL, Router: reg, Ledger: e.history, Tenants: pl.tenants,
		Scaler: pl.scaler, Circuits: pl.circuits, Pipelines: e.pipelines, Prestarter: e.prestarts, Metrics: e.metrics.Metrics, Log: e.log, Now: e.now}
	if m := cfg.Cluster; m != nil {
		dcfg.Members = func() []string {
			var ids []string
			for _, mb := range m.Members() {
				ids = append(ids, mb.ID)
			}
			return ids
		}
	}
	if pl.dispatcher, err = controlplane.NewDispatcher(e.st, dcfg); err != nil {
		return nil, err
	}
	if pl.recoverer, err = controlplane.NewRecoverer(e.st, controlplane.RecovererConfig{NodeID: e.nodeID, Incarnation: e.incarnation,
		Interval: cfg.RecoveryInterval, HeartbeatInterval: cfg.HeartbeatInterval, ReservationTTL: cfg.ReservationTTL, Ledger: e.history,
		OnRequeued: pl.pids.wakePump, Log: e.log}); err != nil {
		return nil, err
	}
	if pl.reconciler, err = controlplane.NewReconciler(e.st, controlplane.ReconcilerConfig{Holder: e.incarnation,
		HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTTL: cfg.HeartbeatTTL, Circuits: pl.circuits, Tenants: pl.tenants,
		Scaler: pl.scaler, Log: e.log, Now: e.now}); err != nil {
		return nil, err
	}
	if pl.lifecycle, err = controlplane.NewLifecycle(e.st, controlplane.LifecycleConfig{Lifecycle: cfg.Lifecycle, Scopes: pl.scopes,
		Scaler: pl.scaler, Control: reg, Metrics: e.metrics.Metrics, Log: e.log, Now: e.now}); err != nil {
		return nil, err
	}
	return pl, nil
}
