package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// agentActor is one active agent (tenant, type, key), a child of the node's agent worker: its
// own mailbox makes it handle one message at a time, in order. A handler's error or panic
// becomes an ERROR outcome and the agent goes on with its next message, state kept. A delivery
// whose deadline passed while it waited in the mailbox is answered TIMEOUT without running the
// handler.
type agentActor struct {
	rt        *agentRuntime
	key       agents.Key
	agent     Agent
	processed uint64 // deliveries handled
}

func (a *agentActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *agentDeliver:
		a.processed++
		a.handle(c, m)
	case *agentDeliveries:
		for i := range m.ds {
			a.processed++
			a.handle(c, &m.ds[i])
		}
	case agentReset:
		a.agent.state = nil
	case agentPassivate:
		c.Send(c.Parent(), &agentPassivated{key: a.key, processed: a.processed, state: a.agent.state})
	case agentDrainMarker:
		c.Send(c.Parent(), &agentDrainAck{key: a.key})
	}
}

func (a *agentActor) handle(c actor.Context, d *agentDeliver) {
	var o *messages.DeliveryOutcome
	var deadline time.Time
	if d.env.Deadline != 0 {
		deadline = time.Unix(0, d.env.Deadline)
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		o = agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "the deadline passed while the message waited for agent %s",
			a.key), a.rt.selfID)
	} else {
		o = a.run(d, deadline)
	}
	switch {
	case d.done != nil:
		d.done <- o
	case d.batch != nil:
		d.batch.set(d.idx, o)
	case d.router != nil && d.direct:
		o.WorkerId = "" // the response names the worker once; the router fills it in
		c.Send(d.router, &messages.AgentSendResponse{WorkerId: a.rt.selfID,
			Results: []*messages.AgentDeliveryResult{{Session: d.session, Outcome: o}}})
	case d.router != nil:
		d.outcome = o
		if a.rt.results.push(d) {
			c.Send(c.Parent(), agentResultsQueued{})
		}
	case o.Status != messages.DeliveryOutcome_DELIVERED:
		a.rt.log.Debug("published message not handled: " + o.Reason)
	}
}

// run calls the handler, turning an error or a panic into an ERROR outcome.
func (a *agentActor) run(d *agentDeliver, deadline time.Time) (o *messages.DeliveryOutcome) {
	ctx := &d.ctx
	ctx.parent, ctx.deadline = a.rt.life.Context(), deadline
	defer ctx.release()
	defer func() {
		if p := recover(); p != nil {
			o = agents.Failed(agents.Reason(agents.ReasonAgentPanicked, "agent %s: %v", a.key, p), a.rt.selfID)
		}
	}()
	a.agent.contentType = d.env.ContentType
	resp, err := d.spec.handler(ctx, &a.agent, d.env)
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && !deadline.IsZero() && !time.Now().Before(deadline):
		// The handler gave up at the deadline: the caller's outcome is TIMEOUT, whichever
		// comes first, the caller's own deadline wake-up (a tick late at most) or this.
		return agents.TimedOut(agents.Reason(agents.ReasonDeadlineExceeded, "agent %s: the deadline passed while it handled the message",
			a.key), a.rt.selfID)
	case err != nil:
		return agents.Failed(err.Error(), a.rt.selfID)
	}
	return agents.Delivered(resp, a.agent.contentType, a.rt.selfID)
}

// agentCtx is the context of one handler call: the agent runtime's stop context with the envelope's
// deadline, armed lazily (no timer exists unless the handler asks for Done), and cancelled when
// the call returns. It is goroutine-safe.
type agentCtx struct {
	parent   context.Context
	deadline time.Time // zero: none

	mu       sync.Mutex // guards inner, cancel, released
	inner    context.Context
	cancel   context.CancelFunc
	released bool
}

func (c *agentCtx) Deadline() (time.Time, bool) {
	pd, ok := c.parent.Deadline()
	switch {
	case c.deadline.IsZero():
		return pd, ok
	case ok && pd.Before(c.deadline):
		return pd, true
	}
	return c.deadline, true
}

func (c *agentCtx) Done() <-chan struct{} { return c.arm().Done() }

func (c *agentCtx) Err() error {
	c.mu.Lock()
	inner, released := c.inner, c.released
	c.mu.Unlock()
	switch {
	case inner != nil:
		return inner.Err()
	case released:
		return context.Canceled
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *agentCtx) Value(key any) any { return c.parent.Value(key) }

func (c *agentCtx) String() string { return fmt.Sprintf("agent call (deadline %v)", c.deadline) }

// arm creates the underlying context on first use.
func (c *agentCtx) arm() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		switch {
		case c.released: // first asked for Done after its call returned: cancelled at once
			var cancel context.CancelFunc
			c.inner, cancel = context.WithCancel(c.parent)
			cancel()
		case c.deadline.IsZero():
			c.inner, c.cancel = context.WithCancel(c.parent)
		default:
			c.inner, c.cancel = context.WithDeadline(c.parent, c.deadline)
		}
	}
	return c.inner
}

// release ends the call: the context is cancelled from now on.
func (c *agentCtx) release() {
	c.mu.Lock()
	c.released = true
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
}
