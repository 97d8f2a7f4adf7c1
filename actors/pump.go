package actors

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// pump is the shared-queue pump: on every tick (and when woken by a submit or a requeue) it
// claims a batch of queued runs under its own PumpRuntimeInstanceId and dispatches them through
// admission. One cycle runs at a time; a full batch schedules the next cycle at once.
type pump struct {
	core   *core
	id     string
	busy   bool
	again  bool
	cancel func()
}

type pumpTick struct{}
type pumpWake struct{}
type pumpCycleDone struct{ full bool }

func (p *pump) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		p.cancel = tickTo(p.core.env.system, c.Self(), p.core.env.cfg.PumpInterval, &pumpTick{})
	case *actor.Stopping, *actor.Restarting:
		if p.cancel != nil {
			p.cancel()
			p.cancel = nil
		}
	case *pumpTick, *pumpWake:
		if p.busy {
			p.again = true
			return
		}
		p.busy, p.again = true, false
		self, sys := c.Self(), p.core.env.system
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*p.core.env.cfg.QueueVisibility)
			defer cancel()
			n, settled, _ := p.core.cycle(ctx, p.id)
			// Go again at once only while a full batch made progress; a batch that all stayed
			// queued (no capacity) waits for the next tick instead of spinning.
			sys.Root.Send(self, &pumpCycleDone{full: n >= p.core.env.cfg.PumpBatch && settled > 0})
		}()
	case *pumpCycleDone:
		p.busy = false
		if p.again || m.full {
			c.Send(c.Self(), &pumpWake{})
		}
	}
}

// cycle claims one batch for pumpID and dispatches it with bounded parallelism. It returns the
// number of items claimed and how many of them left the queue (dispatched, parked or final).
func (c *core) cycle(ctx context.Context, pumpID string) (claimed, settled int, err error) {
	e := c.env
	claims, err := e.st.Claim(ctx, pumpID, e.cfg.PumpBatch, e.cfg.QueueVisibility)
	if err != nil {
		e.log.Warn("claim shared queue", zap.String("pump_runtime_instance_id", pumpID), zap.Error(err))
		return 0, 0, err
	}
	if len(claims) == 0 {
		if p, cl, err := e.st.QueueDepth(ctx); err == nil {
			e.metrics.queue(p, cl)
		}
		return 0, 0, nil
	}
	insts, err := e.st.ListInstances(ctx)
	if err != nil {
		e.log.Warn("list instances", zap.Error(err))
		for _, cl := range claims {
			if err := e.st.Release(ctx, cl); err != nil {
				e.log.Warn("release claim", zap.String("shared_run_id", cl.RunID), zap.Error(err))
			}
		}
		return len(claims), 0, err
	}
	var done atomic.Int64
	sem := make(chan struct{}, max(1, e.cfg.PumpParallelism))
	var wg sync.WaitGroup
	for _, cl := range claims {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := c.dispatchRun(ctx, cl.RunID, pumpID, insts)
			if err != nil {
				e.log.Warn("dispatch run", zap.String("shared_run_id", cl.RunID), zap.Error(err))
			}
			if out == outcomeDone {
				done.Add(1)
				err = e.st.Ack(ctx, cl)
			} else {
				err = e.st.Release(ctx, cl)
			}
			if err != nil {
				e.log.Warn("settle queue claim", zap.String("shared_run_id", cl.RunID), zap.Error(err))
			}
		}()
	}
	wg.Wait()
	if p, cl, err := e.st.QueueDepth(ctx); err == nil {
		e.metrics.queue(p, cl)
	}
	return len(claims), int(done.Load()), nil
}
