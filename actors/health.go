package actors

import (
	"context"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/controlplane"
)

// healthReconciler runs a Reconciler pass every heartbeat interval, one at a time, and keeps
// the set of instances already reported unhealthy, so each transition is acted on once.
type healthReconciler struct {
	env        *env
	reconciler *controlplane.Reconciler
	pass       job
	flagged    map[string]bool
	stopTick   func()
}

type (
	healthTick struct{}
	healthDone struct{ flagged map[string]bool }
)

// healthPassTimeout bounds one reconciler pass.
const healthPassTimeout = 30 * time.Second

func (h *healthReconciler) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		h.flagged = map[string]bool{}
		h.stopTick = h.env.tick(c.Self(), h.env.cfg.HeartbeatInterval, &healthTick{})
	case *actor.Stopping, *actor.Restarting:
		if h.stopTick != nil {
			h.stopTick()
		}
	case *healthTick:
		prev := maps.Clone(h.flagged) // the pass works on its own copy
		h.pass.start(h.env, c.Self(), healthPassTimeout, func(ctx context.Context) any {
			return &healthDone{flagged: h.reconciler.Reconcile(ctx, prev)}
		})
	case *healthDone:
		h.pass.done()
		if m.flagged != nil {
			h.flagged = m.flagged
		}
	}
}
