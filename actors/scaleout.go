package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/controlplane"
)

// scaleOutSupervisor owns one scaleOutRequest actor per unfinished durable request. On start,
// and every scaleOutReloadInterval, it reloads every pending or provisioning request from the
// store, so a request whose control plane died mid scale-out is taken over once that control
// plane's lease on it expires.
type scaleOutSupervisor struct {
	env      *env
	scaler   *controlplane.Scaler
	stopTick func()
}

// Timings of the scale-out actors: the reload interval of the supervisor, and the bounds of a
// reload and of one request's processing.
const (
	scaleOutReloadInterval = 2 * time.Second
	scaleOutReloadTimeout  = 10 * time.Second
	scaleOutTimeout        = time.Minute
)

// Supervisor strategy for scale-out request actors: restart up to 3 times a minute (the
// request's durable status tells the new actor where to continue), then stop; the periodic
// reload picks the request up again.
var scaleOutRequestSupervisor = actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)

type (
	scaleOutCreated struct{ id string }
	scaleOutReload  struct{}
)

func (s *scaleOutSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Stopping, *actor.Restarting:
		if s.stopTick != nil {
			s.stopTick()
			s.stopTick = nil
		}
	case *actor.Started, *scaleOutReload:
		if s.stopTick == nil {
			s.stopTick = s.env.tick(c.Self(), scaleOutReloadInterval, &scaleOutReload{})
		}
		self, sys := c.Self(), c.ActorSystem()
		s.env.group.GoTimeout(scaleOutReloadTimeout, func(ctx context.Context) {
			ids, err := s.scaler.Unfinished(ctx)
			if err != nil {
				s.env.log.Warn("reload scale-out requests", zap.Error(err))
			}
			for _, id := range ids {
				sys.Root.Send(self, &scaleOutCreated{id: id})
			}
		})
	case *scaleOutCreated:
		name := "scaleout-" + m.id
		for _, ch := range c.Children() {
			if ch.Id == c.Self().Id+"/"+name {
				return
			}
		}
		if _, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &scaleOutRequest{env: s.env, scaler: s.scaler, id: m.id}
		}), name); err != nil && !errors.Is(err, actor.ErrNameExists) {
			s.env.log.Warn("spawn scale-out request", zap.String("request_id", m.id), zap.Error(err))
		}
	}
}

// scaleOutRequest drives one durable request to a final status (Scaler.Process) and stops.
type scaleOutRequest struct {
	env    *env
	scaler *controlplane.Scaler
	id     string
	work   job
}

type scaleOutDone struct{ err error }

func (r *scaleOutRequest) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		r.work.start(r.env, c.Self(), scaleOutTimeout, func(ctx context.Context) any {
			return &scaleOutDone{err: r.scaler.Process(ctx, r.id)}
		})
	case *scaleOutDone:
		r.work.done()
		if m.err != nil {
			r.env.log.Warn("scale-out request", zap.String("request_id", r.id), zap.Error(m.err))
		}
		c.Stop(c.Self())
	}
}
