package hostmanager

import (
	"context"
	"time"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
)

// ProviderName is the name under which the process host provider is registered.
const ProviderName = "process"

// MetadataScaleOutRequestID is the descriptor metadata key under which a runtime instance
// publishes the scale-out request it was created for (set by the engine's instances).
const MetadataScaleOutRequestID = "scaleout.request.id"

// Provider is the scale-out provider over a Manager: the local provider's behaviour (scope count
// by prefix, MaxRuntimeInstances, the next free "<prefix>-<n>", readiness in the registry) made
// idempotent per scale-out request. A request retried after its control plane died finds the
// instance an earlier attempt created (by MetadataScaleOutRequestID) and reports it instead of
// creating a second one. Dispatch, status and control are the embedded local provider's.
// All methods are goroutine-safe.
type Provider struct {
	*local.Provider
	instances    func(ctx context.Context) ([]*messages.CapacityDescriptor, error)
	readyTimeout time.Duration
	poll         time.Duration
}

var _ providers.ScaleOuter = (*Provider)(nil)

// NewProvider returns the provider for cfg (cfg.Name defaults to ProviderName; cfg.Host is
// normally the Manager and cfg.Resolver actors.RemotePID).
func NewProvider(cfg local.Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = ProviderName
	}
	p := &Provider{Provider: local.New(cfg), instances: cfg.Instances, readyTimeout: cfg.ReadyTimeout, poll: cfg.PollInterval}
	if p.readyTimeout <= 0 {
		p.readyTimeout = local.DefaultReadyTimeout
	}
	if p.poll <= 0 {
		p.poll = local.DefaultPollInterval
	}
	return p
}

// ScaleOut fulfils req: with an instance already created for req.RequestId it waits for that
// instance to be ready and reports it; otherwise it scales out like the local provider. It
// blocks for at most the ready timeout after creation, or until ctx ends.
func (p *Provider) ScaleOut(ctx context.Context, req *messages.ScaleOutRequest) providers.ScaleOutResult {
	if req.GetRequestId() == "" || p.instances == nil {
		return p.Provider.ScaleOut(ctx, req)
	}
	id := p.createdFor(ctx, req.GetRequestId())
	if id == "" {
		return p.Provider.ScaleOut(ctx, req)
	}
	res := p.waitReady(ctx, id)
	res.TenantId = req.GetSettings().GetTenantId()
	res.CorrelationId = req.GetCorrelationId()
	if !res.Ok {
		return providers.ScaleOutResult{Result: res}
	}
	return providers.ScaleOutResult{Result: res, InstanceIDs: []string{id}}
}

// createdFor returns the live instance created for request id, or "".
func (p *Provider) createdFor(ctx context.Context, requestID string) string {
	list, err := p.instances(ctx)
	if err != nil {
		return ""
	}
	for _, d := range list {
		if d.GetStatus() != messages.InstanceStopped && d.GetMetadata()[MetadataScaleOutRequestID] == requestID {
			return d.GetRuntimeInstanceId()
		}
	}
	return ""
}

// waitReady polls the registry until id is ready or the ready timeout passes.
func (p *Provider) waitReady(ctx context.Context, id string) *messages.ProviderResult {
	ctx, cancel := context.WithTimeout(ctx, p.readyTimeout)
	defer cancel()
	tk := time.NewTicker(p.poll)
	defer tk.Stop()
	for {
		list, err := p.instances(ctx)
		if err == nil {
			for _, d := range list {
				if d.GetRuntimeInstanceId() == id && d.GetStatus() == messages.InstanceReady {
					return providers.Success(p.Name(), id, providers.OpScaleOut)
				}
			}
		}
		select {
		case <-ctx.Done():
			res := providers.Failure(p.Name(), id, providers.OpScaleOut, providers.ReasonInstanceNotReady, true)
			return res
		case <-tk.C:
		}
	}
}
