package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/controlplane"
)

// job runs one piece of an actor's background work at a time on the node's worker group: the
// work's result comes back to the actor as a message, and the actor calls done when it does.
// It is actor state: only the owning actor touches it.
type job struct{ busy bool }

// start runs work on the node's group with a context bounded by timeout, and sends what it
// returns to self, unless a job is already running (or the node is stopping). It reports
// whether it started.
func (j *job) start(e *env, self *actor.PID, timeout time.Duration, work func(ctx context.Context) any) bool {
	if j.busy {
		return false
	}
	j.busy = e.group.GoTimeout(timeout, func(ctx context.Context) { e.system.Root.Send(self, work(ctx)) })
	return j.busy
}

func (j *job) done() { j.busy = false }

// pump is the shared-queue pump: on every tick (and when woken by a submit or a requeue) it
// runs one Dispatcher.Cycle under its own PumpRuntimeInstanceId. One cycle runs at a time; a
// wake during a cycle, or a full batch that made progress, runs the next cycle at once.
type pump struct {
	env        *env
	dispatcher *controlplane.Dispatcher
	id         string
	cycle      job
	again      bool
	stopTick   func()
}

// Messages of the pump.
type (
	pumpTick      struct{}
	pumpWake      struct{}
	pumpCycleDone struct{ full bool }
)

func (p *pump) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		p.stopTick = p.env.tick(c.Self(), p.env.cfg.PumpInterval, &pumpTick{})
	case *actor.Stopping, *actor.Restarting:
		if p.stopTick != nil {
			p.stopTick()
		}
	case *pumpTick, *pumpWake:
		cfg := p.env.cfg
		p.again = !p.cycle.start(p.env, c.Self(), 2*cfg.QueueVisibility, func(ctx context.Context) any {
			start := time.Now()
			n, settled, _ := p.dispatcher.Cycle(ctx, p.id)
			if n > 0 {
				p.env.log.Debug("pump cycle", zap.Int("claimed", n), zap.Int("settled", settled), zap.Duration("took", time.Since(start)))
			}
			// Go again at once only while a full batch made progress; a batch that all stayed
			// queued (no capacity) waits for the next tick instead of spinning.
			return &pumpCycleDone{full: settled > 0 && (n >= cfg.PumpBatch || p.dispatcher.Backlogged())}
		})
	case *pumpCycleDone:
		p.cycle.done()
		if p.again || m.full {
			c.Send(c.Self(), &pumpWake{})
		}
	}
}
