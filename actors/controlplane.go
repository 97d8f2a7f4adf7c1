package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Supervisor strategies of the top of the tree: one-for-one, restart up to 10 times a minute
// (nodeSupervisor is also the guardian's strategy for the node actor itself). The node actor's
// children (host, control plane) and the control plane's children keep no state that is not in
// the store (the pump's claims time out and come back; scale-out requests and recovery are
// re-read), so a restart loses nothing.
var (
	nodeSupervisor         = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)
	controlPlaneSupervisor = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)
)

// nodeActor is the root of a node's supervision tree: runtime host (role runtime) and control
// plane (role control-plane). Its Started returns once the control plane's children exist, so
// that Start returns with the pump, the scale-out supervisor and the tenant scopes reachable.
type nodeActor struct {
	env       *env
	plane     *plane
	onStarted func(host *actor.PID)
}

func (n *nodeActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); !ok {
		return
	}
	var host *actor.PID
	if n.env.cfg.has(RoleRuntime) {
		var err error
		host, err = c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &runtimeHost{env: n.env} },
			actor.WithSupervisor(instanceSupervisor)), "host")
		if err != nil {
			n.env.log.Error("spawn runtime host: " + err.Error())
		}
	}
	if n.env.cfg.has(RoleControlPlane) {
		done := make(chan struct{})
		var once sync.Once
		started := func() { once.Do(func() { close(done) }) }
		if _, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &controlPlane{env: n.env, plane: n.plane, onStarted: started}
		}, actor.WithSupervisor(controlPlaneSupervisor)), "controlplane"); err != nil {
			n.env.log.Error("spawn control plane: " + err.Error())
			started()
		}
		<-done
	}
	if n.onStarted != nil {
		n.onStarted(host)
	}
}

// controlPlane is the parent of the control-plane actors of a node: the shared-queue pump, the
// scale-out supervisor, the tenant supervisor, the recovery coordinator and the health
// reconciler. It publishes the PIDs the services wake (pump, scale-out supervisor, tenant
// supervisor) once its children exist.
type controlPlane struct {
	env       *env
	plane     *plane
	onStarted func()
}

func (cp *controlPlane) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); !ok {
		return
	}
	e, pl := cp.env, cp.plane
	pump := cp.spawn(c, "pump", func() actor.Actor { return &pump{env: e, dispatcher: pl.dispatcher, id: pl.pumpID} }, nil)
	scaleOut := cp.spawn(c, "scaleout", func() actor.Actor { return &scaleOutSupervisor{env: e, scaler: pl.scaler} },
		scaleOutRequestSupervisor)
	if pid := cp.spawn(c, "tenants", func() actor.Actor { return &tenantSupervisor{env: e, plane: pl} }, tenantScopeSupervisor); pid != nil {
		pl.scopes.set(pid)
	}
	cp.spawn(c, "recovery", func() actor.Actor { return &recoveryCoordinator{env: e, recoverer: pl.recoverer} }, nil)
	cp.spawn(c, "health", func() actor.Actor { return &healthReconciler{env: e, reconciler: pl.reconciler} }, nil)
	pl.pids.set(pump, scaleOut)
	if cp.onStarted != nil {
		cp.onStarted()
	}
}

// spawn starts a child under name, which supervises its own children with strategy (nil: the
// default). A failure is logged and returns nil.
func (cp *controlPlane) spawn(c actor.Context, name string, produce actor.Producer, strategy actor.SupervisorStrategy) *actor.PID {
	var opts []actor.PropsOption
	if strategy != nil {
		opts = append(opts, actor.WithSupervisor(strategy))
	}
	pid, err := c.SpawnNamed(actor.PropsFromProducer(produce, opts...), name)
	if err != nil {
		cp.env.log.Error("spawn " + name + ": " + err.Error())
		return nil
	}
	return pid
}
