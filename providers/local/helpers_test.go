package local

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// newSystem returns a quiet actor system shut down at the end of the test.
func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	return system
}

// spawn starts an actor and stops it at the end of the test.
func spawn(t *testing.T, system *actor.ActorSystem, fn actor.ReceiveFunc) *actor.PID {
	t.Helper()
	pid := system.Root.Spawn(actor.PropsFromFunc(fn))
	t.Cleanup(func() {
		if err := system.Root.StopFuture(pid).Wait(); err != nil {
			t.Errorf("stop %s: %v", pid.Id, err)
		}
	})
	return pid
}

// instanceActor plays a runtime instance: it answers the four request types.
func instanceActor(id string) actor.ReceiveFunc {
	return func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *messages.DispatchRequest:
			ctx.Respond(&messages.ProviderResult{Ok: true, LocalRunId: "lr-" + msg.GetSharedRunId(), TenantId: msg.GetSnapshot().GetTenantId()})
		case *messages.RunStatusRequest:
			ctx.Respond(&messages.RunStatus{LocalRunId: msg.GetLocalRunId(), Status: messages.RunRunning})
		case *messages.QueueStatusRequest:
			ctx.Respond(&messages.QueueStatus{
				Capacity:          &messages.CapacityDescriptor{RuntimeInstanceId: msg.GetRuntimeInstanceId()},
				QueuedLocalRunIds: []string{"lr-1"},
			})
		case *messages.ControlRequest:
			if msg.GetRuntimeInstanceId() != id {
				ctx.Respond(&messages.ProviderResult{Reason: "wrong-instance"})
				return
			}
			ctx.Respond(&messages.ProviderResult{Ok: true})
		}
	}
}

// directory is an in-memory Directory.
type directory struct {
	mu   sync.Mutex // guards pids
	pids map[string]*actor.PID
}

func newDirectory() *directory { return &directory{pids: make(map[string]*actor.PID)} }

func (d *directory) Lookup(id string) (*actor.PID, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pid, ok := d.pids[id]
	return pid, ok
}

func (d *directory) put(id string, pid *actor.PID) {
	d.mu.Lock()
	d.pids[id] = pid
	d.mu.Unlock()
}

// registry is an in-memory instance registry.
type registry struct {
	mu      sync.Mutex // guards list, listErr
	list    []*messages.CapacityDescriptor
	listErr error
}

func (r *registry) Instances(context.Context) ([]*messages.CapacityDescriptor, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listErr != nil {
		return nil, r.listErr
	}
	out := make([]*messages.CapacityDescriptor, len(r.list))
	for i, d := range r.list {
		out[i] = proto.Clone(d).(*messages.CapacityDescriptor)
	}
	return out, nil
}

// upsert replaces the descriptor with the same id, or appends d.
func (r *registry) upsert(d *messages.CapacityDescriptor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, old := range r.list {
		if old.GetRuntimeInstanceId() == d.GetRuntimeInstanceId() {
			r.list[i] = d
			return
		}
	}
	r.list = append(r.list, d)
}

func (r *registry) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.list))
	for _, d := range r.list {
		out = append(out, d.GetRuntimeInstanceId())
	}
	return out
}

// host is a test double for the lead's runtime host: it spawns an instance actor, publishes it
// in the directory and registers its descriptor asynchronously, first starting then ready.
type host struct {
	t        *testing.T
	system   *actor.ActorSystem
	dir      *directory
	reg      *registry
	fail     bool // CreateInstance returns an error
	neverUp  bool // the instance never becomes ready
	wg       sync.WaitGroup
	mu       sync.Mutex // guards created
	created  []string
	requests []string
}

var errHostDown = errors.New("host down")

func (h *host) CreateInstance(_ context.Context, id string, s *messages.TenantSettings, requestID string) error {
	if h.fail {
		return errHostDown
	}
	h.mu.Lock()
	h.created = append(h.created, id)
	h.requests = append(h.requests, requestID)
	h.mu.Unlock()
	pid := spawn(h.t, h.system, instanceActor(id))
	h.dir.put(id, pid)
	d := &messages.CapacityDescriptor{
		RuntimeInstanceId:       id,
		ProviderName:            Name,
		Status:                  messages.InstanceStarting,
		TenantId:                s.GetTenantId(),
		TenantGroupId:           s.GetTenantGroupId(),
		IsolationMode:           s.GetIsolationMode(),
		RuntimeInstanceIdPrefix: s.GetRuntimeInstanceIdPrefix(),
	}
	h.reg.upsert(proto.Clone(d).(*messages.CapacityDescriptor))
	if h.neverUp {
		return nil
	}
	h.wg.Add(1)
	go func() { // self-registration happens after CreateInstance returns
		defer h.wg.Done()
		d.Status = messages.InstanceReady
		h.reg.upsert(d)
	}()
	return nil
}

func (h *host) createdIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.created...)
}
