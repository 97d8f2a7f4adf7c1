// Package providers is dair's runtime instance provider model: how the control plane reaches a
// runtime instance (dispatch, status, control), reads capacity, and creates capacity
// (scale-out), without knowing the transport.
//
// A provider is a value with a stable lowercase name (^[a-z][a-z0-9-]*$: "local", "actor",
// "http", "grpc", "redis-command-queue", "kubernetes") that implements some of the capability
// interfaces Dispatcher, StatusReader, Controller, CapacityReader and ScaleOuter. A provider
// implements only what it supports; capabilities are discovered by type assertion, never by a
// wider interface.
//
// Providers are registered once in a Registry at startup; a second registration under the same
// name fails with ErrDuplicateProvider so a misconfigured node does not start. The Registry is
// the router: Resolve finds a provider by name and capability, ForDescriptor reads the provider
// name from a capacity descriptor (ProviderName, then Metadata["provider.name"], then "local"),
// and the Dispatch, Control, RunStatus, QueueStatus and ScaleOut wrappers resolve, call, fill in
// the structured result and report it (with its duration) to an observer for the ledger and
// metrics. Scale-out picks its provider by the request's ProviderHint, then the configured
// default, then "local".
//
// The router never makes tenant decisions: it resolves a provider for a descriptor that
// admission already selected as tenant-visible and eligible.
//
// # Results and reasons
//
// Every operation returns a *messages.ProviderResult (provider, runtime instance, op, ok,
// reason, retryable, tenant, correlation id). A failed result has ok=false and one of these
// stable kebab-case reasons (constants Reason*):
//
//	provider-not-found            no provider is registered under the name (not retryable)
//	capability-not-supported      the provider lacks the capability (not retryable)
//	invalid-request               the request or descriptor is missing required fields (not retryable)
//	invalid-response              the instance answered with an unexpected message (not retryable)
//	provider-misconfigured        the provider lacks a dependency it needs (not retryable)
//	instance-not-found            the runtime instance is not reachable by this provider (retryable)
//	instance-unreachable          the message went to a dead letter (retryable)
//	dispatch-timeout              the instance did not answer a dispatch in time (retryable)
//	request-timeout               the instance did not answer a status or control request in time (retryable)
//	canceled                      the caller's context ended first (retryable)
//	no-scaler                     the provider cannot create instances here (not retryable)
//	max-runtime-instances-reached the tenant scope already has its maximum instances (not retryable)
//	list-instances-failed         the instance registry could not be read (retryable)
//	host-create-failed            the host could not start the instance (retryable)
//	instance-not-ready            the new instance did not become ready in time (retryable)
//
// Providers may add their own reasons in the same style.
//
// # Usage
//
//	reg := providers.NewRegistry(providers.WithObserver(func(r *messages.ProviderResult, d time.Duration) {
//		metrics.Observe(r.GetProvider(), r.GetOp(), r.GetOk(), d)
//	}))
//	if err := reg.Register(local.New(local.Config{System: system, Directory: dir, Host: host})); err != nil {
//		return fmt.Errorf("register local provider: %w", err)
//	}
//	res := reg.Dispatch(ctx, descriptor, req) // resolved by descriptor's provider.name
//	if !res.GetOk() && res.GetRetryable() {
//		// requeue
//	}
//	out := reg.ScaleOut(ctx, scaleOutReq, cfg.DefaultProvider)
package providers
