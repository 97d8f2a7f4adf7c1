package providers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dairuntime/dair/messages"
)

// Observer receives every result produced by a Registry wrapper with the time the operation
// took. It is called synchronously on the caller's goroutine, possibly from many goroutines at
// once, and must not retain or modify the result.
type Observer func(result *messages.ProviderResult, took time.Duration)

// Option configures a Registry.
type Option func(*Registry)

// WithObserver adds an observer (ledger, metrics) called after every wrapper operation.
func WithObserver(fn func(*messages.ProviderResult, time.Duration)) Option {
	return func(r *Registry) {
		if fn != nil {
			r.observers = append(r.observers, fn)
		}
	}
}

// Registry holds the registered providers by name and routes operations to them. It is
// goroutine-safe. Providers are normally registered once at startup.
type Registry struct {
	observers []Observer // set at construction, read-only after

	// mu guards byName.
	mu     sync.RWMutex
	byName map[string]Provider
}

// NewRegistry returns an empty Registry.
func NewRegistry(opts ...Option) *Registry {
	r := &Registry{byName: make(map[string]Provider)}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// Register adds p under p.Name(). It returns an error wrapping ErrInvalidName when p is nil or
// its name is not ^[a-z][a-z0-9-]*$, and one wrapping ErrDuplicateProvider when the name is
// taken; both are startup errors the caller should not ignore.
func (r *Registry) Register(p Provider) error {
	if p == nil {
		return fmt.Errorf("register provider: %w: nil provider", ErrInvalidName)
	}
	name := p.Name()
	if !ValidName(name) {
		return fmt.Errorf("register provider: %w: %q", ErrInvalidName, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("register provider: %w: %q", ErrDuplicateProvider, name)
	}
	r.byName[name] = p
	return nil
}

// Names returns the registered provider names, sorted. The caller owns the slice.
func (r *Registry) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.byName))
	for name := range r.byName {
		names = append(names, name)
	}
	r.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Lookup returns the provider registered under name.
func (r *Registry) Lookup(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.byName[name]
	return p, ok
}

// Resolve returns the provider registered under name as capability interface T. When there is
// no such provider, or it does not implement T, it returns the zero T and a non-retryable
// failure result with reason provider-not-found or capability-not-supported, provider=name and
// op=string(c). c names the capability T stands for; it is used only in the failure result.
func Resolve[T Provider](r *Registry, name string, c Capability) (T, *messages.ProviderResult) {
	var zero T
	p, ok := r.Lookup(name)
	if !ok {
		return zero, Failure(name, "", string(c), ReasonProviderNotFound, false)
	}
	t, ok := p.(T)
	if !ok {
		return zero, Failure(name, "", string(c), ReasonCapabilityNotSupported, false)
	}
	return t, nil
}

// ForDescriptor returns the name of the provider that reaches the instance described by d:
// d.ProviderName, else d.Metadata["provider.name"], else "local". Names are trimmed and
// lowercased.
func (r *Registry) ForDescriptor(d *messages.CapacityDescriptor) string {
	if name := normalize(d.GetProviderName()); name != "" {
		return name
	}
	if name := normalize(d.GetMetadata()[MetadataProviderName]); name != "" {
		return name
	}
	return DefaultProvider
}

// Dispatch resolves the Dispatcher for d and delivers req. It blocks like Dispatcher.Dispatch,
// never returns nil, fills the result's provider, instance, op, tenant and correlation id when
// the provider left them empty, and reports the result to the observers.
func (r *Registry) Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	start := time.Now()
	name := r.ForDescriptor(d)
	ctxFields := resultContext{
		instance:    firstNonEmpty(d.GetRuntimeInstanceId(), req.GetRuntimeInstanceId()),
		op:          OpDispatch,
		tenant:      firstNonEmpty(req.GetSnapshot().GetTenantId(), d.GetTenantId()),
		correlation: firstNonEmpty(req.GetCorrelationId(), req.GetSnapshot().GetCorrelationId()),
	}
	p, res := Resolve[Dispatcher](r, name, CapabilityDispatch)
	if res == nil {
		res = p.Dispatch(ctx, d, req)
	}
	res = ctxFields.fill(res, name)
	r.observe(res, time.Since(start))
	return res
}

// Control resolves the Controller for d and sends req. It blocks like Controller.Control, never
// returns nil, fills empty result fields and reports the result to the observers.
func (r *Registry) Control(ctx context.Context, d *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult {
	start := time.Now()
	name := r.ForDescriptor(d)
	ctxFields := resultContext{
		instance: firstNonEmpty(d.GetRuntimeInstanceId(), req.GetRuntimeInstanceId()),
		op:       OpControl,
		tenant:   d.GetTenantId(),
	}
	p, res := Resolve[Controller](r, name, CapabilityControl)
	if res == nil {
		res = p.Control(ctx, d, req)
	}
	res = ctxFields.fill(res, name)
	r.observe(res, time.Since(start))
	return res
}

// RunStatus resolves the StatusReader for d and reads a local run's status. It never returns
// nil; failures have Status "unknown" and a failed Result. The Result is reported to the
// observers.
func (r *Registry) RunStatus(ctx context.Context, d *messages.CapacityDescriptor, localRunID string) *messages.RunStatus {
	start := time.Now()
	name := r.ForDescriptor(d)
	ctxFields := resultContext{instance: d.GetRuntimeInstanceId(), op: OpRunStatus, tenant: d.GetTenantId()}
	p, res := Resolve[StatusReader](r, name, CapabilityStatus)
	var st *messages.RunStatus
	if res == nil {
		st = p.RunStatus(ctx, d, localRunID)
	}
	if st == nil {
		if res == nil {
			res = Failure(name, "", OpRunStatus, ReasonInvalidResponse, false)
		}
		st = &messages.RunStatus{LocalRunId: localRunID, Status: RunStatusUnknown}
	}
	if st.Result == nil {
		if res == nil {
			res = Success(name, "", OpRunStatus)
		}
		st.Result = res
	}
	st.Result = ctxFields.fill(st.Result, name)
	r.observe(st.Result, time.Since(start))
	return st
}

// QueueStatus resolves the StatusReader for d and reads the instance's queue state. It never
// returns nil; failures carry a failed Result, which is reported to the observers.
func (r *Registry) QueueStatus(ctx context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus {
	start := time.Now()
	name := r.ForDescriptor(d)
	ctxFields := resultContext{instance: d.GetRuntimeInstanceId(), op: OpQueueStatus, tenant: d.GetTenantId()}
	p, res := Resolve[StatusReader](r, name, CapabilityStatus)
	var qs *messages.QueueStatus
	if res == nil {
		qs = p.QueueStatus(ctx, d)
	}
	if qs == nil {
		if res == nil {
			res = Failure(name, "", OpQueueStatus, ReasonInvalidResponse, false)
		}
		qs = &messages.QueueStatus{}
	}
	if qs.Result == nil {
		if res == nil {
			res = Success(name, "", OpQueueStatus)
		}
		qs.Result = res
	}
	qs.Result = ctxFields.fill(qs.Result, name)
	r.observe(qs.Result, time.Since(start))
	return qs
}

// ScaleOut selects the scale-out provider — req.ProviderHint, else defaultName, else "local" —
// and asks it for capacity in req's tenant scope. It blocks like ScaleOuter.ScaleOut, always
// returns a non-nil Result with tenant and correlation filled, and reports it to the observers.
func (r *Registry) ScaleOut(ctx context.Context, req *messages.ScaleOutRequest, defaultName string) ScaleOutResult {
	start := time.Now()
	name := firstNonEmpty(normalize(req.GetProviderHint()), normalize(defaultName), DefaultProvider)
	ctxFields := resultContext{
		op:          OpScaleOut,
		tenant:      req.GetSettings().GetTenantId(),
		correlation: req.GetCorrelationId(),
	}
	var out ScaleOutResult
	p, res := Resolve[ScaleOuter](r, name, CapabilityScaleOut)
	if res == nil {
		out = p.ScaleOut(ctx, req)
	} else {
		out.Result = res
	}
	if out.Result == nil {
		out.Result = Failure(name, "", OpScaleOut, ReasonInvalidResponse, false)
	}
	out.Result = ctxFields.fill(out.Result, name)
	r.observe(out.Result, time.Since(start))
	return out
}

func (r *Registry) observe(res *messages.ProviderResult, took time.Duration) {
	for _, fn := range r.observers {
		fn(res, took)
	}
}

// resultContext holds the fields a wrapper fills into a result the provider left empty.
type resultContext struct {
	instance    string
	op          string
	tenant      string
	correlation string
}

// fill returns res (or an invalid-response failure when res is nil) with empty fields set.
func (c resultContext) fill(res *messages.ProviderResult, provider string) *messages.ProviderResult {
	if res == nil {
		res = Failure(provider, "", c.op, ReasonInvalidResponse, false)
	}
	if res.Provider == "" {
		res.Provider = provider
	}
	if res.RuntimeInstanceId == "" {
		res.RuntimeInstanceId = c.instance
	}
	if res.Op == "" {
		res.Op = c.op
	}
	if res.TenantId == "" {
		res.TenantId = c.tenant
	}
	if res.CorrelationId == "" {
		res.CorrelationId = c.correlation
	}
	return res
}

func normalize(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
