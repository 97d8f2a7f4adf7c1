package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/controlplane"
)

// recoveryCoordinator runs a Recoverer round every RecoveryInterval, one at a time; every 30th
// round also repairs queued and parked runs. The rounds are safe on several control planes
// (see controlplane.Recoverer).
type recoveryCoordinator struct {
	env       *env
	recoverer *controlplane.Recoverer
	round     job
	rounds    int
	stopTick  func()
}

type (
	recoveryTick struct{}
	recoveryDone struct{}
)

// recoveryRoundTimeout bounds one recovery round.
const recoveryRoundTimeout = time.Minute

func (r *recoveryCoordinator) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		r.stopTick = r.env.tick(c.Self(), r.env.cfg.RecoveryInterval, &recoveryTick{})
		c.Send(c.Self(), &recoveryTick{})
	case *actor.Stopping, *actor.Restarting:
		if r.stopTick != nil {
			r.stopTick()
		}
	case *recoveryTick:
		repair := r.rounds%30 == 0
		if r.round.start(r.env, c.Self(), recoveryRoundTimeout, func(ctx context.Context) any {
			if err := r.recoverer.Round(ctx, repair); err != nil {
				r.env.log.Warn("recovery round", zap.Error(err))
			}
			return &recoveryDone{}
		}) {
			r.rounds++
		}
	case *recoveryDone:
		r.round.done()
	}
}
