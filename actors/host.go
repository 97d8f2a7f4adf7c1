package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/messages"
)

// runtimeHost is the parent of a node's runtime instances (role runtime). It creates instances
// on request: scale-out through the local provider (createInstance), through the cluster's
// "actor" provider from another node (messages.CreateInstanceRequest), or configured at start.
type runtimeHost struct{ env *env }

// Supervisor strategy of the host for its instances: restart a crashed instance (it
// re-registers and re-dispatches its own executions) up to 10 times a minute, then stop it;
// its runs are recovered by the recovery coordinator once its registry entry expires.
var instanceSupervisor = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)

// createInstance asks the host to start an instance; the outcome goes to done (buffered), so
// that the asker can stop waiting when its context ends (a future cannot be given up early).
type createInstance struct {
	spec InstanceSpec
	done chan error
}

func (h *runtimeHost) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *createInstance:
		err := h.spawn(c, m.spec)
		if err != nil {
			err = fmt.Errorf("spawn instance %s: %w", m.spec.ID, err)
		}
		m.done <- err
	case *messages.CreateInstanceRequest:
		res := &messages.ProviderResult{Provider: ActorProviderName, RuntimeInstanceId: m.RuntimeInstanceId, Op: "create-instance", Ok: true,
			TenantId: m.GetSettings().GetTenantId()}
		if err := h.spawn(c, InstanceSpec{ID: m.RuntimeInstanceId, Settings: m.Settings, ScaleOutRequestID: m.ScaleOutRequestId}); err != nil {
			res.Ok, res.Reason, res.Retryable = false, "spawn-failed: "+err.Error(), true
		}
		c.Respond(res)
	}
}

// spawn starts instance spec unless it runs here already.
func (h *runtimeHost) spawn(c actor.Context, spec InstanceSpec) error {
	if _, ok := h.env.dir.Lookup(spec.ID); ok {
		return nil
	}
	_, err := c.SpawnNamed(newInstanceProps(h.env, spec), spec.ID)
	return err
}

// hostHandle implements providers/local.Host for the node's runtime host actor.
type hostHandle struct {
	env *env
	pid func() *actor.PID // the host actor (nil until the tree has started)
}

// CreateInstance asks the runtime host to start instance id for settings. It blocks until the
// actor exists; the instance registers itself in the store asynchronously.
func (h *hostHandle) CreateInstance(ctx context.Context, id string, settings *messages.TenantSettings, scaleOutRequestID string) error {
	return h.create(ctx, InstanceSpec{ID: id, Settings: settings, ScaleOutRequestID: scaleOutRequestID})
}

// create asks the runtime host to start the instance of spec (with its transport). It blocks
// until the actor exists, ctx ends, or 5 s passed without an answer (a host that stopped never
// answers).
func (h *hostHandle) create(ctx context.Context, spec InstanceSpec) error {
	id := spec.ID
	pid := h.pid()
	if pid == nil {
		return fmt.Errorf("create instance %s: actors: no runtime host on this node", id)
	}
	done := make(chan error, 1)
	h.env.system.Root.Send(pid, &createInstance{spec: spec, done: done})
	t := time.NewTimer(createTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("create instance %s: %w", id, ctx.Err())
	case <-t.C:
		return fmt.Errorf("create instance %s: no answer from the runtime host within %s", id, createTimeout)
	}
}

// createTimeout bounds the wait for the runtime host's answer to a createInstance.
const createTimeout = 5 * time.Second
