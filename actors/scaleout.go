package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/messages"
)

// scaleOutSupervisor owns one scaleOutRequest actor per unfinished durable request. On start,
// and every scaleOutReloadInterval, it reloads every pending or provisioning request from the
// store, so a request whose control plane died mid scale-out is taken over once that control
// plane's lease on it expires.
type scaleOutSupervisor struct {
	core   *core
	cancel func() // stops the reload ticker
}

// Lease timings of scale-out requests: the owner holds "scaleout/<id>" for scaleOutLeaseTTL and
// renews it every third of that while it works, so a crashed owner blocks the request for at
// most scaleOutLeaseTTL; other control planes retry every scaleOutReloadInterval.
const (
	scaleOutLeaseTTL       = 6 * time.Second
	scaleOutReloadInterval = 2 * time.Second
)

// Supervisor strategy for scale-out request actors: restart up to 3 times a minute (the
// request's durable status tells the new actor where to continue), then stop; the periodic
// reload picks the request up again.
var scaleOutRequestSupervisor = actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)

type scaleOutCreated struct{ id string }
type scaleOutReload struct{}

func (s *scaleOutSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Stopping, *actor.Restarting:
		if s.cancel != nil {
			s.cancel()
			s.cancel = nil
		}
	case *actor.Started, *scaleOutReload:
		self, sys, st := c.Self(), s.core.env.system, s.core.env.st
		if s.cancel == nil {
			s.cancel = tickTo(sys, self, scaleOutReloadInterval, &scaleOutReload{})
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			reqs, err := st.ListScaleOuts(ctx, messages.ScaleOutPending, messages.ScaleOutProvisioning)
			if err != nil {
				s.core.env.log.Warn("reload scale-out requests", zap.Error(err))
				return
			}
			for _, r := range reqs {
				sys.Root.Send(self, &scaleOutCreated{id: r.RequestId})
			}
		}()
	case *scaleOutCreated:
		name := "scaleout-" + m.id
		for _, ch := range c.Children() {
			if ch.Id == c.Self().Id+"/"+name {
				return
			}
		}
		if _, err := c.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &scaleOutRequest{core: s.core, id: m.id}
		}), name); err != nil && !errors.Is(err, actor.ErrNameExists) {
			s.core.env.log.Warn("spawn scale-out request", zap.String("request_id", m.id), zap.Error(err))
		}
	}
}

// scaleOutRequest drives one durable request Pending → Provisioning → Fulfilled/Failed through
// the scale-out provider selected by hint → configured default → local, then requeues the
// waiting runs of the same tenant scope. It never dispatches a run itself.
type scaleOutRequest struct {
	core *core
	id   string
}

type scaleOutDone struct{ err error }

func (r *scaleOutRequest) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		self, sys := c.Self(), r.core.env.system
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sys.Root.Send(self, &scaleOutDone{err: r.core.processScaleOut(ctx, r.id)})
		}()
	case *scaleOutDone:
		if m.err != nil {
			r.core.env.log.Warn("scale-out request", zap.String("request_id", r.id), zap.Error(m.err))
		}
		c.Stop(c.Self())
	}
}

// processScaleOut runs one request to a final status. Several control planes may hold the same
// request: a store lease makes one of them the owner; the others return at once.
func (c *core) processScaleOut(ctx context.Context, id string) error {
	e := c.env
	lease := "scaleout/" + id
	ok, err := e.st.AcquireLease(ctx, lease, e.incarnation, scaleOutLeaseTTL)
	if err != nil {
		return fmt.Errorf("lease %s: %w", lease, err)
	}
	if !ok {
		return nil
	}
	stopRenew := c.renewLease(lease, scaleOutLeaseTTL)
	defer func() {
		stopRenew()
		if err := e.st.ReleaseLease(context.Background(), lease, e.incarnation); err != nil {
			e.log.Warn("release lease", zap.String("lease", lease), zap.Error(err))
		}
	}()
	req, err := e.st.GetScaleOut(ctx, id)
	if err != nil {
		return fmt.Errorf("load scale-out %s: %w", id, err)
	}
	if req.Status == messages.ScaleOutFulfilled || req.Status == messages.ScaleOutFailed {
		_, err := c.requeueScope(ctx, req.Settings, id, messages.KindScaleOutFulfilled, "scale-out-"+req.Status)
		return err
	}
	if _, err := e.st.UpdateScaleOut(ctx, id, func(r *messages.ScaleOutRequest) error {
		r.Status = messages.ScaleOutProvisioning
		r.Attempts++
		r.UpdatedAt = e.now().UnixNano()
		return nil
	}); err != nil {
		return fmt.Errorf("mark scale-out provisioning: %w", err)
	}
	res := c.providers.ScaleOut(ctx, req, e.cfg.ScaleOutProvider)
	status, kind, reason := messages.ScaleOutFulfilled, messages.KindScaleOutFulfilled, "capacity-ready"
	if res.Result == nil || !res.Result.Ok {
		status, kind = messages.ScaleOutFailed, messages.KindScaleOutFailed
		reason = "provider-failed"
		if res.Result != nil {
			reason = res.Result.Reason
		}
	}
	e.metrics.provider(res.Result)
	if _, err := e.st.UpdateScaleOut(ctx, id, func(r *messages.ScaleOutRequest) error {
		r.Status = status
		r.FailureReason = map[bool]string{true: "", false: reason}[status == messages.ScaleOutFulfilled]
		r.RuntimeInstanceIds = append(r.RuntimeInstanceIds, res.InstanceIDs...)
		r.UpdatedAt = e.now().UnixNano()
		return nil
	}); err != nil {
		return fmt.Errorf("finish scale-out %s: %w", id, err)
	}
	e.log.Info("scale-out finished", zap.String("request_id", id), zap.String("status", status), zap.String("reason", reason),
		zap.Strings("runtime_instance_ids", res.InstanceIDs), zap.String("tenant_id", req.GetSettings().GetTenantId()))
	// Waiting runs go back to the shared queue either way: on success the pump finds the new
	// capacity; on failure admission decides again (queue, another scale-out, or reject).
	_, err = c.requeueScope(ctx, req.Settings, id, kind, reason)
	return err
}

// renewLease keeps lease held by this incarnation, renewing it every ttl/3 until the returned
// function is called (which waits for the renewing goroutine to end).
func (c *core) renewLease(lease string, ttl time.Duration) (stop func()) {
	e := c.env
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tk := time.NewTicker(ttl / 3)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
			ok, err := e.st.AcquireLease(ctx, lease, e.incarnation, ttl)
			cancel()
			if err != nil || !ok {
				e.log.Warn("renew lease", zap.String("lease", lease), zap.Bool("held", ok), zap.Error(err))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
