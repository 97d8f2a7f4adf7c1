package local

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// Name is the provider name of the local provider.
const Name = "local"

// Defaults for Config's zero fields.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultReadyTimeout   = 10 * time.Second
	DefaultPollInterval   = 10 * time.Millisecond
)

// Sentinel errors of the local provider.
var (
	// ErrNoSystem is returned by Config.Validate when System is nil.
	ErrNoSystem = errors.New("local: no actor system")
	// ErrNoDirectory is returned by Config.Validate when Directory is nil.
	ErrNoDirectory = errors.New("local: no directory")
	// ErrNoInstances is returned by Config.Validate when Host is set but Instances is nil.
	ErrNoInstances = errors.New("local: host without instance listing")
)

// Directory finds the PIDs of the runtime instance actors running in this process.
// Lookup must be goroutine-safe and must not block.
type Directory interface {
	Lookup(runtimeInstanceID string) (*actor.PID, bool)
}

// Host starts runtime instance actors. CreateInstance blocks until the instance actor is
// started (not until it is ready); the instance then registers itself in the store
// asynchronously. It must be goroutine-safe.
type Host interface {
	CreateInstance(ctx context.Context, id string, settings *messages.TenantSettings, scaleOutRequestID string) error
}

// Config configures the local provider. The zero value of each duration means its default.
type Config struct {
	// System carries requests to the instance actors. Required.
	System *actor.ActorSystem
	// Directory maps runtime instance ids to local PIDs. Required unless Resolver is set.
	Directory Directory
	// Resolver finds an instance's PID from its descriptor (e.g. from its remote address and
	// actor id, for instances on other nodes). It takes precedence over Directory.
	Resolver func(d *messages.CapacityDescriptor) (*actor.PID, bool)
	// Name is the provider name. Default "local"; the cluster registers this same provider
	// shape as "actor" with a remote Resolver and Host.
	Name string
	// Host creates instances for scale-out. Nil means scale-out fails with reason "no-scaler".
	Host Host
	// Instances lists the live runtime instance registry (every tenant). Required with Host.
	// The provider does not modify the returned descriptors.
	Instances func(ctx context.Context) ([]*messages.CapacityDescriptor, error)
	// InUse, when set, reports whether an id that is absent from the registry is still
	// referenced by a departed instance (unrecovered executions, live reservations). Scale-out
	// does not reuse such an id: fencing and recovery tell instances apart by id.
	InUse func(ctx context.Context, id string) (bool, error)
	// RequestTimeout bounds each request to an instance actor. Default 5s.
	RequestTimeout time.Duration
	// ReadyTimeout bounds the wait for a new instance to be ready. Default 10s.
	ReadyTimeout time.Duration
	// PollInterval is how often scale-out re-reads Instances while waiting. Default 10ms.
	PollInterval time.Duration
}

// Validate reports missing dependencies.
func (c Config) Validate() error {
	switch {
	case c.System == nil:
		return ErrNoSystem
	case c.Directory == nil && c.Resolver == nil:
		return ErrNoDirectory
	case c.Host != nil && c.Instances == nil:
		return ErrNoInstances
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Name == "" {
		c.Name = Name
	}
	return c
}

// Provider is the local provider. All methods are goroutine-safe.
type Provider struct {
	cfg Config

	// mu guards scopes.
	mu sync.Mutex
	// scopes holds one semaphore (capacity 1) per runtime instance id prefix, serializing
	// scale-outs of the same prefix while letting a waiter give up when its context ends.
	scopes map[string]chan struct{}
}

var (
	_ providers.Dispatcher   = (*Provider)(nil)
	_ providers.StatusReader = (*Provider)(nil)
	_ providers.Controller   = (*Provider)(nil)
	_ providers.ScaleOuter   = (*Provider)(nil)
)

// New returns a local provider. Missing dependencies are reported per operation as a
// "provider-misconfigured" failure; call cfg.Validate first to fail at startup instead.
func New(cfg Config) *Provider {
	return &Provider{cfg: cfg.withDefaults(), scopes: make(map[string]chan struct{})}
}

// Name returns the provider name ("local" unless configured).
func (p *Provider) Name() string { return p.cfg.Name }

// Dispatch sends req to the instance actor of d and returns its answer. It blocks for at most
// RequestTimeout (or until ctx ends). A missing instance is "instance-not-found", a timeout
// "dispatch-timeout", both retryable. After a timeout or cancellation the instance may still
// have accepted the run; instances de-duplicate dispatches by shared run id.
func (p *Provider) Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	id := instanceID(d, req.GetRuntimeInstanceId())
	if req == nil {
		return providers.Failure(p.cfg.Name, id, providers.OpDispatch, providers.ReasonInvalidRequest, false)
	}
	answer, fail := p.request(ctx, d, id, providers.OpDispatch, req, providers.ReasonDispatchTimeout)
	if fail != nil {
		return fail
	}
	res, ok := answer.(*messages.ProviderResult)
	if !ok || res == nil {
		return providers.Failure(p.cfg.Name, id, providers.OpDispatch, providers.ReasonInvalidResponse, false)
	}
	return p.complete(res, id, providers.OpDispatch)
}

// RunStatus asks the instance of d for a local run's status. It blocks for at most
// RequestTimeout and never returns nil; failures have Status "unknown" and a failed Result.
func (p *Provider) RunStatus(ctx context.Context, d *messages.CapacityDescriptor, localRunID string) *messages.RunStatus {
	id := instanceID(d, "")
	msg := &messages.RunStatusRequest{RuntimeInstanceId: id, LocalRunId: localRunID}
	answer, fail := p.request(ctx, d, id, providers.OpRunStatus, msg, providers.ReasonRequestTimeout)
	if fail != nil {
		return &messages.RunStatus{LocalRunId: localRunID, Status: providers.RunStatusUnknown, Result: fail}
	}
	st, ok := answer.(*messages.RunStatus)
	if !ok || st == nil {
		fail = providers.Failure(p.cfg.Name, id, providers.OpRunStatus, providers.ReasonInvalidResponse, false)
		return &messages.RunStatus{LocalRunId: localRunID, Status: providers.RunStatusUnknown, Result: fail}
	}
	if st.Result == nil {
		st.Result = providers.Success(p.cfg.Name, id, providers.OpRunStatus)
	}
	st.Result = p.complete(st.Result, id, providers.OpRunStatus)
	return st
}

// QueueStatus asks the instance of d for its queue state. It blocks for at most RequestTimeout
// and never returns nil; failures carry a failed Result.
func (p *Provider) QueueStatus(ctx context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus {
	id := instanceID(d, "")
	msg := &messages.QueueStatusRequest{RuntimeInstanceId: id}
	answer, fail := p.request(ctx, d, id, providers.OpQueueStatus, msg, providers.ReasonRequestTimeout)
	if fail != nil {
		return &messages.QueueStatus{Result: fail}
	}
	qs, ok := answer.(*messages.QueueStatus)
	if !ok || qs == nil {
		return &messages.QueueStatus{Result: providers.Failure(p.cfg.Name, id, providers.OpQueueStatus, providers.ReasonInvalidResponse, false)}
	}
	if qs.Result == nil {
		qs.Result = providers.Success(p.cfg.Name, id, providers.OpQueueStatus)
	}
	qs.Result = p.complete(qs.Result, id, providers.OpQueueStatus)
	return qs
}

// Control sends req to the instance of d and returns its answer. It blocks for at most
// RequestTimeout and never returns nil.
func (p *Provider) Control(ctx context.Context, d *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult {
	id := instanceID(d, req.GetRuntimeInstanceId())
	if req == nil || req.GetOp() == "" {
		return providers.Failure(p.cfg.Name, id, providers.OpControl, providers.ReasonInvalidRequest, false)
	}
	if req.RuntimeInstanceId == "" {
		req = &messages.ControlRequest{
			RuntimeInstanceId: id, Op: req.Op, LocalRunId: req.LocalRunId,
			SharedRunId: req.SharedRunId, Reason: req.Reason,
		}
	}
	answer, fail := p.request(ctx, d, id, providers.OpControl, req, providers.ReasonRequestTimeout)
	if fail != nil {
		return fail
	}
	res, ok := answer.(*messages.ProviderResult)
	if !ok || res == nil {
		return providers.Failure(p.cfg.Name, id, providers.OpControl, providers.ReasonInvalidResponse, false)
	}
	return p.complete(res, id, providers.OpControl)
}

// request sends msg to the instance's PID and waits for the answer, RequestTimeout or ctx. On
// failure it returns a failed result; timeoutReason names a timeout.
func (p *Provider) request(ctx context.Context, d *messages.CapacityDescriptor, id, op string, msg any, timeoutReason string) (any, *messages.ProviderResult) {
	if p.cfg.System == nil || (p.cfg.Directory == nil && p.cfg.Resolver == nil) {
		return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonMisconfigured, false)
	}
	if id == "" {
		return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonInvalidRequest, false)
	}
	if err := ctx.Err(); err != nil {
		return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonCanceled, true)
	}
	var (
		pid *actor.PID
		ok  bool
	)
	if p.cfg.Resolver != nil {
		pid, ok = p.cfg.Resolver(d)
	} else {
		pid, ok = p.cfg.Directory.Lookup(id)
	}
	if !ok || pid == nil {
		return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonInstanceNotFound, true)
	}
	timeout := p.cfg.RequestTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < timeout {
			timeout = left
		}
	}
	if timeout <= 0 {
		return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonCanceled, true)
	}
	future := p.cfg.System.Root.RequestFuture(pid, msg, timeout)
	type outcome struct {
		answer any
		err    error
	}
	// The goroutine ends when the future resolves, at the latest after timeout.
	done := make(chan outcome, 1)
	go func() {
		answer, err := future.Result()
		done <- outcome{answer: answer, err: err}
	}()
	select {
	case <-ctx.Done():
		return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonCanceled, true)
	case out := <-done:
		switch {
		case out.err == nil:
			return out.answer, nil
		case errors.Is(out.err, actor.ErrTimeout):
			return nil, providers.Failure(p.cfg.Name, id, op, timeoutReason, true)
		default: // actor.ErrDeadLetter: the instance stopped after Lookup
			return nil, providers.Failure(p.cfg.Name, id, op, providers.ReasonInstanceUnreachable, true)
		}
	}
}

// instanceID returns the descriptor's runtime instance id, else fallback.
func instanceID(d *messages.CapacityDescriptor, fallback string) string {
	if id := d.GetRuntimeInstanceId(); id != "" {
		return id
	}
	return fallback
}

// complete fills the provider, instance and op of an instance's answer when left empty.
func (p *Provider) complete(res *messages.ProviderResult, id, op string) *messages.ProviderResult {
	if res.Provider == "" {
		res.Provider = p.cfg.Name
	}
	if res.RuntimeInstanceId == "" {
		res.RuntimeInstanceId = id
	}
	if res.Op == "" {
		res.Op = op
	}
	return res
}
