package local

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// DefaultPrefix is the runtime instance id prefix of shared capacity and of tenants without one.
const DefaultPrefix = "runtime-instance"

// ScaleOut creates one runtime instance in the tenant scope of req.Settings and waits until it
// is ready in the registry. It blocks for at most ReadyTimeout after creation (or until ctx
// ends) and is goroutine-safe: scale-outs of the same prefix are serialized, so two concurrent
// requests never pick the same id or overshoot MaxRuntimeInstances.
//
// MaxRuntimeInstances <= 0 means 1. On success Result.RuntimeInstanceId and InstanceIDs name
// the new instance.
func (p *Provider) ScaleOut(ctx context.Context, req *messages.ScaleOutRequest) providers.ScaleOutResult {
	settings := req.GetSettings()
	fail := func(reason string, retryable bool) providers.ScaleOutResult {
		res := providers.Failure(p.cfg.Name, "", providers.OpScaleOut, reason, retryable)
		res.TenantId = settings.GetTenantId()
		res.CorrelationId = req.GetCorrelationId()
		return providers.ScaleOutResult{Result: res}
	}
	switch {
	case req == nil || settings == nil:
		return fail(providers.ReasonInvalidRequest, false)
	case p.cfg.Host == nil:
		return fail(providers.ReasonNoScaler, false)
	case p.cfg.Instances == nil:
		return fail(providers.ReasonMisconfigured, false)
	}
	prefix := scopePrefix(settings)

	release, ok := p.lockScope(ctx, prefix)
	if !ok {
		return fail(providers.ReasonCanceled, true)
	}
	defer release()

	list, err := p.cfg.Instances(ctx)
	if err != nil {
		return fail(providers.ReasonListInstancesFailed, true)
	}
	maxInstances := int(settings.GetMaxRuntimeInstances())
	if maxInstances <= 0 {
		maxInstances = 1
	}
	if countInScope(list, settings) >= maxInstances {
		return fail(providers.ReasonMaxRuntimeInstancesReached, false)
	}
	id, err := p.freeID(ctx, list, prefix)
	if err != nil {
		return fail(providers.ReasonListInstancesFailed, true)
	}

	if err := p.cfg.Host.CreateInstance(ctx, id, settings, req.GetRequestId()); err != nil {
		out := fail(providers.ReasonHostCreateFailed, true)
		out.Result.RuntimeInstanceId = id
		return out
	}
	if reason, retryable := p.waitReady(ctx, id); reason != "" {
		out := fail(reason, retryable)
		out.Result.RuntimeInstanceId = id
		return out
	}
	res := providers.Success(p.cfg.Name, id, providers.OpScaleOut)
	res.TenantId = settings.GetTenantId()
	res.CorrelationId = req.GetCorrelationId()
	return providers.ScaleOutResult{Result: res, InstanceIDs: []string{id}}
}

// lockScope acquires the semaphore of prefix, or gives up when ctx ends.
func (p *Provider) lockScope(ctx context.Context, prefix string) (release func(), ok bool) {
	p.mu.Lock()
	sem, exists := p.scopes[prefix]
	if !exists {
		sem = make(chan struct{}, 1)
		p.scopes[prefix] = sem
	}
	p.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, true
	case <-ctx.Done():
		return nil, false
	}
}

// waitReady polls the registry until id is ready. It returns an empty reason on success.
func (p *Provider) waitReady(ctx context.Context, id string) (reason string, retryable bool) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	defer cancel()
	ticker := time.NewTicker(p.cfg.PollInterval)
	defer ticker.Stop()
	for {
		list, err := p.cfg.Instances(ctx)
		if err == nil && isReady(list, id) {
			return "", false
		}
		select {
		case <-ctx.Done():
			return providers.ReasonInstanceNotReady, true
		case <-ticker.C:
		}
	}
}

func isReady(list []*messages.CapacityDescriptor, id string) bool {
	for _, d := range list {
		if d.GetRuntimeInstanceId() == id {
			return d.GetStatus() == messages.InstanceReady
		}
	}
	return false
}

// scopePrefix returns the tenant's runtime instance id prefix, or DefaultPrefix.
func scopePrefix(s *messages.TenantSettings) string {
	if prefix := strings.TrimSpace(s.GetRuntimeInstanceIdPrefix()); prefix != "" {
		return prefix
	}
	return DefaultPrefix
}

// countInScope counts the live (not stopped, not unhealthy) instances of the tenant scope of s: same prefix
// and, for dedicated or hybrid tenants, owned by the tenant or its group; for shared tenants,
// shared instances. It mirrors the tenancy package's rule (seed 000: the local scaler counts
// matching hosts by prefix, never the global host count).
func countInScope(list []*messages.CapacityDescriptor, s *messages.TenantSettings) int {
	prefix := scopePrefix(s)
	mode := isolation(s.GetIsolationMode())
	n := 0
	for _, d := range list {
		// An unhealthy instance (circuit open, marked by the health reconciler) gets no work:
		// it does not hold a place its replacement needs.
		if d.GetStatus() == messages.InstanceStopped || d.GetStatus() == messages.InstanceUnhealthy || instancePrefix(d) != prefix {
			continue
		}
		switch mode {
		case messages.IsolationShared:
			if isolation(d.GetIsolationMode()) == messages.IsolationShared {
				n++
			}
		default:
			if ownedBy(d, s) {
				n++
			}
		}
	}
	return n
}

// ownedBy reports whether d belongs to the tenant of s or to its tenant group.
func ownedBy(d *messages.CapacityDescriptor, s *messages.TenantSettings) bool {
	if s.GetTenantId() != "" && d.GetTenantId() == s.GetTenantId() {
		return true
	}
	return s.GetTenantGroupId() != "" && d.GetTenantGroupId() == s.GetTenantGroupId()
}

// isolation normalizes an isolation mode; empty means shared.
func isolation(mode string) string {
	mode = strings.ToLower(strings.TrimSpace(mode))
	if mode == "" {
		return messages.IsolationShared
	}
	return mode
}

// instancePrefix returns d's prefix: the strong field, else the id without its "-<n>" suffix.
func instancePrefix(d *messages.CapacityDescriptor) string {
	if prefix := d.GetRuntimeInstanceIdPrefix(); prefix != "" {
		return prefix
	}
	id := d.GetRuntimeInstanceId()
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		if _, err := strconv.Atoi(id[i+1:]); err == nil {
			return id[:i]
		}
	}
	return id
}

// maxInUseChecks bounds how many ids freeID asks InUse about before it gives up reuse and
// takes the next id above every live one.
const maxInUseChecks = 16

// freeID returns nextFreeID(list, prefix), skipping ids that Config.InUse reports as still
// referenced by a departed instance.
func (p *Provider) freeID(ctx context.Context, list []*messages.CapacityDescriptor, prefix string) (string, error) {
	if p.cfg.InUse == nil {
		return nextFreeID(list, prefix), nil
	}
	taken := append([]*messages.CapacityDescriptor(nil), list...)
	for range maxInUseChecks {
		id := nextFreeID(taken, prefix)
		busy, err := p.cfg.InUse(ctx, id)
		if err != nil {
			return "", err
		}
		if !busy {
			return id, nil
		}
		taken = append(taken, &messages.CapacityDescriptor{RuntimeInstanceId: id, Status: messages.InstanceReady})
	}
	return nextFreeID(taken, prefix), nil
}

// nextFreeID returns the smallest "<prefix>-<n>", n >= 1, not used by a live instance of any
// tenant (ids are global).
func nextFreeID(list []*messages.CapacityDescriptor, prefix string) string {
	var used []int
	for _, d := range list {
		if d.GetStatus() == messages.InstanceStopped {
			continue
		}
		rest, ok := strings.CutPrefix(d.GetRuntimeInstanceId(), prefix+"-")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil && n > 0 && strconv.Itoa(n) == rest {
			used = append(used, n)
		}
	}
	n := 1
	for slices.Contains(used, n) {
		n++
	}
	return prefix + "-" + strconv.Itoa(n)
}
