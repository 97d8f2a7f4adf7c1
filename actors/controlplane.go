package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// controlPlane is the parent of the control-plane singletons of a node: the shared-queue pump,
// the scale-out supervisor, the tenant supervisor (tenantscope.go) and the recovery coordinator.
//
// Supervisor strategy: one-for-one, restart each child up to 10 times a minute. The children
// keep no state that is not in the store (the pump's claims time out and come back; scale-out
// requests and recovery are re-read), so a restart loses nothing.
type controlPlane struct {
	core      *core
	lifecycle *tenantLifecycle
	// pids of the children, published to the node once they exist.
	onStarted func(pump, scaleOut *actor.PID)
}

// pumpIDOf is the PumpRuntimeInstanceId (and queue claim owner) of a node's pump.
func pumpIDOf(nodeID string) string { return "pump-" + nodeID }

var controlPlaneSupervisor = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)

func (cp *controlPlane) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		pumpPID, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &pump{core: cp.core, id: pumpIDOf(cp.core.env.nodeID)}
		}), "pump")
		if err != nil {
			cp.core.env.log.Error("spawn pump: " + err.Error())
		}
		soPID, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &scaleOutSupervisor{core: cp.core}
		}, actor.WithSupervisor(scaleOutRequestSupervisor)), "scaleout")
		if err != nil {
			cp.core.env.log.Error("spawn scale-out supervisor: " + err.Error())
		}
		if pid, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &tenantSupervisor{lc: cp.lifecycle}
		}, actor.WithSupervisor(tenantScopeSupervisor)), "tenants"); err != nil {
			cp.core.env.log.Error("spawn tenant supervisor: " + err.Error())
		} else {
			cp.lifecycle.setSupervisor(pid)
		}
		if _, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &recoveryCoordinator{core: cp.core}
		}), "recovery"); err != nil {
			cp.core.env.log.Error("spawn recovery coordinator: " + err.Error())
		}
		if _, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &healthReconciler{core: cp.core}
		}), "health"); err != nil {
			cp.core.env.log.Error("spawn health reconciler: " + err.Error())
		}
		if cp.onStarted != nil {
			cp.onStarted(pumpPID, soPID)
		}
	}
}

// nodeActor is the root of a node's supervision tree: control plane (role control-plane) and
// runtime host (role runtime).
//
// Supervisor strategy: one-for-one, restart each subtree up to 10 times a minute.
type nodeActor struct {
	env          *env
	core         *core
	lifecycle    *tenantLifecycle
	controlPlane bool
	runtime      bool
	onStarted    func(host, pump, scaleOut *actor.PID)
}

func (n *nodeActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); !ok {
		return
	}
	var host, pumpPID, soPID *actor.PID
	if n.runtime {
		var err error
		host, err = c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &runtimeHost{env: n.env} },
			actor.WithSupervisor(instanceSupervisor)), "host")
		if err != nil {
			n.env.log.Error("spawn runtime host: " + err.Error())
		}
	}
	if n.controlPlane {
		done := make(chan struct{})
		var once sync.Once
		started := func(p, s *actor.PID) { once.Do(func() { pumpPID, soPID = p, s; close(done) }) }
		if _, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &controlPlane{core: n.core, lifecycle: n.lifecycle, onStarted: started}
		}, actor.WithSupervisor(controlPlaneSupervisor)), "controlplane"); err != nil {
			n.env.log.Error("spawn control plane: " + err.Error())
			once.Do(func() { close(done) })
		}
		<-done
	}
	if n.onStarted != nil {
		n.onStarted(host, pumpPID, soPID)
	}
}
