package actors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Circuit breaker settings: after circuitFailures consecutive retryable dispatch failures to an
// instance, this control plane sends it no work for circuitOpenFor (then tries again).
const (
	circuitFailures = 3
	circuitOpenFor  = 10 * time.Second
)

// circuits is a control plane's view of which instances failed to take work. It is a client-side
// breaker: each control plane keeps its own, as each one dispatches independently.
type circuits struct {
	mu    sync.Mutex // guards fails, open
	fails map[string]int
	open  map[string]time.Time
}

func newCircuits() *circuits {
	return &circuits{fails: map[string]int{}, open: map[string]time.Time{}}
}

// record notes one dispatch outcome; a retryable failure counts toward opening the circuit.
func (c *circuits) record(id string, res *messages.ProviderResult, now time.Time) (opened bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.GetOk() {
		delete(c.fails, id)
		delete(c.open, id)
		return false
	}
	if !res.GetRetryable() {
		return false
	}
	c.fails[id]++
	if c.fails[id] >= circuitFailures {
		if _, already := c.open[id]; !already {
			opened = true
		}
		c.open[id] = now.Add(circuitOpenFor)
	}
	return opened
}

// isOpen reports whether the circuit of id is open at now.
func (c *circuits) isOpen(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.open[id]
	if !ok {
		return false
	}
	if now.After(until) {
		delete(c.open, id) // half-open: the next dispatch decides
		c.fails[id] = circuitFailures - 1
		return false
	}
	return true
}

// overlay returns insts with instances whose circuit is open marked unhealthy (copies; the
// input is not modified), so admission skips them and does not count them in their scope.
func (c *circuits) overlay(insts []*messages.CapacityDescriptor, now time.Time) []*messages.CapacityDescriptor {
	return markUnhealthy(insts, func(d *messages.CapacityDescriptor) bool { return c.isOpen(d.RuntimeInstanceId, now) })
}

// markUnhealthy returns insts with a copy of each descriptor that bad reports marked unhealthy
// and unable to accept runs; insts itself when bad reports none. insts is not modified.
func markUnhealthy(insts []*messages.CapacityDescriptor, bad func(*messages.CapacityDescriptor) bool) []*messages.CapacityDescriptor {
	var out []*messages.CapacityDescriptor
	for i, d := range insts {
		if !bad(d) {
			if out != nil {
				out = append(out, d)
			}
			continue
		}
		if out == nil {
			out = append(make([]*messages.CapacityDescriptor, 0, len(insts)), insts[:i]...)
		}
		cp := proto.Clone(d).(*messages.CapacityDescriptor)
		cp.Status, cp.CanAcceptRun = messages.InstanceUnhealthy, false
		out = append(out, cp)
	}
	if out == nil {
		return insts
	}
	return out
}

// healthReconciler watches the registry: instances whose heartbeat went stale or whose circuit
// opened are reported unhealthy (they get no new work: admission skips stale heartbeats and open
// circuits), and one replacement instance is requested for their tenant scope when the scope has
// room. Stale descriptors expire from the registry by their TTL (self-healing); the recovery
// coordinator moves their runs. Singleton per cluster through the store lease "health".
type healthReconciler struct {
	core    *core
	cancel  func()
	busy    bool
	flagged map[string]bool // instances already reported, so each transition is acted on once
}

type healthTick struct{}
type healthDone struct{ flagged map[string]bool }

func (h *healthReconciler) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		h.flagged = map[string]bool{}
		h.cancel = tickTo(h.core.env.system, c.Self(), h.core.env.cfg.HeartbeatInterval, &healthTick{})
	case *actor.Stopping, *actor.Restarting:
		if h.cancel != nil {
			h.cancel()
			h.cancel = nil
		}
	case *healthTick:
		if h.busy {
			return
		}
		h.busy = true
		prev := make(map[string]bool, len(h.flagged))
		for k, v := range h.flagged {
			prev[k] = v
		}
		self, sys := c.Self(), h.core.env.system
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sys.Root.Send(self, &healthDone{flagged: h.core.reconcile(ctx, prev)})
		}()
	case *healthDone:
		h.busy = false
		if m.flagged != nil {
			h.flagged = m.flagged
		}
	}
}

// reconcile is one pass; flagged holds the instances reported before and is returned updated.
func (c *core) reconcile(ctx context.Context, flagged map[string]bool) map[string]bool {
	e := c.env
	ok, err := e.st.AcquireLease(ctx, "health", e.incarnation, 3*e.cfg.HeartbeatInterval+time.Second)
	if err != nil || !ok {
		return flagged
	}
	insts, err := e.st.ListInstances(ctx)
	if err != nil {
		e.log.Warn("health: list instances", zap.Error(err))
		return flagged
	}
	now := e.now()
	stale := now.Add(-c.staleAfter()).UnixNano()
	live := map[string]bool{}
	for _, d := range insts {
		live[d.RuntimeInstanceId] = true
		bad, why := false, ""
		switch {
		case d.LastHeartbeatAt < stale:
			bad, why = true, "stale-heartbeat"
		case c.circuits.isOpen(d.RuntimeInstanceId, now):
			bad, why = true, "circuit-open"
		}
		if !bad {
			delete(flagged, d.RuntimeInstanceId)
			continue
		}
		if flagged[d.RuntimeInstanceId] {
			continue
		}
		flagged[d.RuntimeInstanceId] = true
		e.log.Warn("runtime instance unhealthy; no new work goes to it", zap.String("runtime_instance_id", d.RuntimeInstanceId),
			zap.String("reason", why), zap.String("tenant_id", d.TenantId))
		c.requestReplacement(ctx, d, insts, why)
	}
	for id := range flagged {
		if !live[id] {
			delete(flagged, id) // expired from the registry: TTL self-healing finished the job
		}
	}
	return flagged
}

// requestReplacement asks for one more instance in d's scope when the scope's healthy instances
// are fewer than its maximum and no request for the scope is already pending.
func (c *core) requestReplacement(ctx context.Context, d *messages.CapacityDescriptor, insts []*messages.CapacityDescriptor, why string) {
	e := c.env
	var t *messages.TenantSettings
	if d.IsolationMode == messages.IsolationShared || d.IsolationMode == "" {
		t = tenancy.Defaults(d.TenantId)
		t.RuntimeInstanceIdPrefix, t.MaxRuntimeInstances = d.RuntimeInstanceIdPrefix, d.MaxRuntimeInstances
	} else {
		var err error
		if t, err = c.tenantSettings(ctx, d.TenantId); err != nil {
			return
		}
	}
	healthy := 0
	now := e.now()
	stale := now.Add(-c.staleAfter()).UnixNano()
	for _, x := range insts {
		if tenancy.InScope(x, t) && x.LastHeartbeatAt >= stale && !c.circuits.isOpen(x.RuntimeInstanceId, now) {
			healthy++
		}
	}
	pending, err := c.pendingScaleOuts(ctx, t)
	if err != nil || healthy+pending >= int(t.MaxRuntimeInstances) {
		return
	}
	req := &messages.ScaleOutRequest{RequestId: ids.New("scaleout"), Settings: t, ControlPlaneId: e.cfg.ControlPlaneID,
		ProviderHint: e.cfg.ScaleOutProvider, Status: messages.ScaleOutPending, CreatedAt: now.UnixNano(), UpdatedAt: now.UnixNano()}
	if err := e.st.CreateScaleOut(ctx, req); err != nil {
		e.log.Warn("health: request replacement", zap.Error(err))
		return
	}
	e.log.Info("replacement capacity requested", zap.String("request_id", req.RequestId), zap.String("replaces", d.RuntimeInstanceId),
		zap.String("reason", why), zap.String("tenant_id", t.TenantId))
	if c.scaleOutCreated != nil {
		c.scaleOutCreated(req.RequestId)
	}
}

// staleAfter is how old a heartbeat may be before the instance counts as unhealthy: two missed
// heartbeats, and at least half the registry TTL (scheduling hiccups must not flap instances).
func (c *core) staleAfter() time.Duration {
	return max(2*c.env.cfg.HeartbeatInterval, c.env.cfg.HeartbeatTTL/2)
}
