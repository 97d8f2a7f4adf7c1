package providers

import (
	"context"
	"errors"
	"regexp"

	"github.com/dairuntime/dair/messages"
)

// Sentinel errors of the providers package.
var (
	// ErrDuplicateProvider is returned by Registry.Register when a provider with the same name is
	// already registered. It is a startup error.
	ErrDuplicateProvider = errors.New("providers: duplicate provider")
	// ErrInvalidName is returned by Registry.Register when the provider's name does not match
	// ^[a-z][a-z0-9-]*$, or the provider is nil.
	ErrInvalidName = errors.New("providers: invalid provider name")
)

// Capability names one optional provider interface.
type Capability string

// The capabilities of seed 000.
const (
	CapabilityDispatch Capability = "dispatch"  // Dispatcher
	CapabilityStatus   Capability = "status"    // StatusReader
	CapabilityControl  Capability = "control"   // Controller
	CapabilityCapacity Capability = "capacity"  // CapacityReader
	CapabilityScaleOut Capability = "scale-out" // ScaleOuter
)

// String returns the capability's name.
func (c Capability) String() string { return string(c) }

// AllCapabilities returns every capability in a fixed order. The caller owns the slice.
func AllCapabilities() []Capability {
	return []Capability{
		CapabilityDispatch, CapabilityStatus, CapabilityControl, CapabilityCapacity, CapabilityScaleOut,
	}
}

// DefaultProvider is the provider used when a descriptor or scale-out request names none.
const DefaultProvider = "local"

// MetadataProviderName is the descriptor metadata key that may carry the provider name.
const MetadataProviderName = "provider.name"

// Ops recorded in ProviderResult.Op.
const (
	OpDispatch    = "dispatch"
	OpRunStatus   = "run-status"
	OpQueueStatus = "queue-status"
	OpControl     = "control"
	OpCapacity    = "capacity"
	OpScaleOut    = "scale-out"
)

// Failure reasons recorded in ProviderResult.Reason; see the package documentation.
const (
	ReasonProviderNotFound           = "provider-not-found"
	ReasonCapabilityNotSupported     = "capability-not-supported"
	ReasonInvalidRequest             = "invalid-request"
	ReasonInvalidResponse            = "invalid-response"
	ReasonMisconfigured              = "provider-misconfigured"
	ReasonInstanceNotFound           = "instance-not-found"
	ReasonInstanceUnreachable        = "instance-unreachable"
	ReasonDispatchTimeout            = "dispatch-timeout"
	ReasonRequestTimeout             = "request-timeout"
	ReasonCanceled                   = "canceled"
	ReasonNoScaler                   = "no-scaler"
	ReasonMaxRuntimeInstancesReached = "max-runtime-instances-reached"
	ReasonListInstancesFailed        = "list-instances-failed"
	ReasonHostCreateFailed           = "host-create-failed"
	ReasonInstanceNotReady           = "instance-not-ready"
)

// RunStatusUnknown is RunStatus.Status when the status could not be read (see RunStatus.Result).
const RunStatusUnknown = "unknown"

// namePattern is the grammar of provider names.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// ValidName reports whether name is a valid provider name.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Provider is the base of every capability: a stable lowercase name, unique in a Registry.
// Name must return the same value for the provider's lifetime.
type Provider interface {
	Name() string
}

// Dispatcher delivers a shared run into the local queue of the runtime instance described by d.
//
// Dispatch blocks until the instance accepts or refuses the run, or ctx ends, and is
// goroutine-safe. It never returns nil; failures are results with Ok false. It must deliver
// req.Snapshot unchanged and must not execute steps itself.
type Dispatcher interface {
	Provider
	Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult
}

// StatusReader reads runtime-local status from an instance.
//
// Both methods block until the instance answers or ctx ends, are goroutine-safe, and never
// return nil: a failure is reported in the returned message's Result. The caller owns the
// returned messages.
type StatusReader interface {
	Provider
	RunStatus(ctx context.Context, d *messages.CapacityDescriptor, localRunID string) *messages.RunStatus
	QueueStatus(ctx context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus
}

// Controller sends an operational command (pause_queue, resume_queue, drain_queue, cancel_run,
// pause_run, resume_run, stop_instance) to an instance. Control blocks until the instance
// answers or ctx ends, is goroutine-safe, and never returns nil.
type Controller interface {
	Provider
	Control(ctx context.Context, d *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult
}

// CapacityReader exposes runtime capacity descriptors. Both methods block on I/O and are
// goroutine-safe; the caller owns the returned descriptors. Capacity returns an error wrapping
// the implementation's not-found error when id is unknown.
type CapacityReader interface {
	Provider
	Capacity(ctx context.Context, id string) (*messages.CapacityDescriptor, error)
	ListCapacity(ctx context.Context) ([]*messages.CapacityDescriptor, error)
}

// ScaleOutResult is the outcome of a scale-out: the structured result and, when it succeeded,
// the ids of the runtime instances created (owned by the caller).
type ScaleOutResult struct {
	Result      *messages.ProviderResult
	InstanceIDs []string
}

// ScaleOuter creates runtime capacity inside the request's tenant scope (req.Settings).
//
// ScaleOut blocks until the new capacity is ready (observed in the registry), refused, or ctx
// ends, and is goroutine-safe. Result is never nil.
type ScaleOuter interface {
	Provider
	ScaleOut(ctx context.Context, req *messages.ScaleOutRequest) ScaleOutResult
}

// Failure returns a failed result with the given fields. The caller owns it.
func Failure(provider, instance, op, reason string, retryable bool) *messages.ProviderResult {
	return &messages.ProviderResult{
		Provider:          provider,
		RuntimeInstanceId: instance,
		Op:                op,
		Ok:                false,
		Reason:            reason,
		Retryable:         retryable,
	}
}

// Success returns a successful result with the given fields. The caller owns it.
func Success(provider, instance, op string) *messages.ProviderResult {
	return &messages.ProviderResult{
		Provider:          provider,
		RuntimeInstanceId: instance,
		Op:                op,
		Ok:                true,
	}
}

// Supports reports whether p implements capability c.
func Supports(p Provider, c Capability) bool {
	switch c {
	case CapabilityDispatch:
		_, ok := p.(Dispatcher)
		return ok
	case CapabilityStatus:
		_, ok := p.(StatusReader)
		return ok
	case CapabilityControl:
		_, ok := p.(Controller)
		return ok
	case CapabilityCapacity:
		_, ok := p.(CapacityReader)
		return ok
	case CapabilityScaleOut:
		_, ok := p.(ScaleOuter)
		return ok
	default:
		return false
	}
}

// Capabilities lists the capabilities p implements, in AllCapabilities order.
func Capabilities(p Provider) []Capability {
	var out []Capability
	for _, c := range AllCapabilities() {
		if Supports(p, c) {
			out = append(out, c)
		}
	}
	return out
}
