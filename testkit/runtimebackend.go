package testkit

import (
	"context"
	"sync"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/remote"
)

// RuntimeBackend is the far side of a runtime transport for transport tests: a
// remote.Backend serving one instance id that accepts every dispatch, records it (with the
// incoming gRPC metadata of the call, when there is some) and answers status and control.
// SetHang(true) makes every call block, past its context, until SetHang(false): a host that
// never answers. All methods are goroutine-safe.
type RuntimeBackend struct {
	// ID is the runtime instance served.
	ID string

	// mu guards hang, dispatches, metadata and calls.
	mu         sync.Mutex
	hang       chan struct{} // non-nil while hanging; closed by SetHang(false)
	dispatches []*messages.DispatchRequest
	metadata   []metadata.MD
	calls      int
}

var _ remote.Backend = (*RuntimeBackend)(nil)

// NewRuntimeBackend returns a backend serving instance id.
func NewRuntimeBackend(id string) *RuntimeBackend { return &RuntimeBackend{ID: id} }

// Instances lists the served instance (a remote.Instances).
func (b *RuntimeBackend) Instances() []string { return []string{b.ID} }

// SetHang makes every later call block until SetHang(false) (true), or releases the calls
// blocked and answers again (false).
func (b *RuntimeBackend) SetHang(v bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case v && b.hang == nil:
		b.hang = make(chan struct{})
	case !v && b.hang != nil:
		close(b.hang)
		b.hang = nil
	}
}

// Calls returns how many calls reached the backend.
func (b *RuntimeBackend) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// Dispatches returns copies of the dispatch requests received and the incoming metadata of
// each, in order. The caller owns them.
func (b *RuntimeBackend) Dispatches() ([]*messages.DispatchRequest, []metadata.MD) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*messages.DispatchRequest, len(b.dispatches))
	for i, d := range b.dispatches {
		out[i] = proto.Clone(d).(*messages.DispatchRequest)
	}
	mds := make([]metadata.MD, len(b.metadata))
	for i, md := range b.metadata {
		mds[i] = md.Copy()
	}
	return out, mds
}

// enter counts a call and blocks while the backend hangs; it reports false for a call that
// hung (its answer is a failure nobody waits for any more).
func (b *RuntimeBackend) enter(context.Context) bool {
	b.mu.Lock()
	b.calls++
	hang := b.hang
	b.mu.Unlock()
	if hang != nil {
		<-hang
		return false
	}
	return true
}

// Name returns "local" (the provider a host's backend is).
func (b *RuntimeBackend) Name() string { return "local" }

// Dispatch records req and accepts it.
func (b *RuntimeBackend) Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	if !b.enter(ctx) {
		return providers.Failure(b.Name(), d.GetRuntimeInstanceId(), providers.OpDispatch, "cancelled", true)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	b.mu.Lock()
	b.dispatches = append(b.dispatches, proto.Clone(req).(*messages.DispatchRequest))
	b.metadata = append(b.metadata, md.Copy())
	b.mu.Unlock()
	return providers.Success(b.Name(), d.GetRuntimeInstanceId(), providers.OpDispatch)
}

// RunStatus answers every run as queued.
func (b *RuntimeBackend) RunStatus(ctx context.Context, d *messages.CapacityDescriptor, localRunID string) *messages.RunStatus {
	if !b.enter(ctx) {
		return &messages.RunStatus{LocalRunId: localRunID, Result: providers.Failure(b.Name(), d.GetRuntimeInstanceId(), providers.OpRunStatus, "cancelled", true)}
	}
	return &messages.RunStatus{LocalRunId: localRunID, Status: "queued", Result: providers.Success(b.Name(), d.GetRuntimeInstanceId(), providers.OpRunStatus)}
}

// QueueStatus answers an empty queue and a ready descriptor.
func (b *RuntimeBackend) QueueStatus(ctx context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus {
	if !b.enter(ctx) {
		return &messages.QueueStatus{Result: providers.Failure(b.Name(), d.GetRuntimeInstanceId(), providers.OpQueueStatus, "cancelled", true)}
	}
	return &messages.QueueStatus{Capacity: &messages.CapacityDescriptor{RuntimeInstanceId: b.ID, Status: messages.InstanceReady},
		Result: providers.Success(b.Name(), d.GetRuntimeInstanceId(), providers.OpQueueStatus)}
}

// Control accepts every op.
func (b *RuntimeBackend) Control(ctx context.Context, d *messages.CapacityDescriptor, _ *messages.ControlRequest) *messages.ProviderResult {
	if !b.enter(ctx) {
		return providers.Failure(b.Name(), d.GetRuntimeInstanceId(), providers.OpControl, "cancelled", true)
	}
	return providers.Success(b.Name(), d.GetRuntimeInstanceId(), providers.OpControl)
}
