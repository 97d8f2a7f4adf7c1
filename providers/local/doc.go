// Package local is the "local" runtime instance provider: it reaches runtime instances that
// run in this process as protoactor actors, and creates new ones through a Host.
//
// Dispatch, status and control are request/response messages sent to the instance actor's PID
// (found through a Directory) with a timeout:
//
//	*messages.DispatchRequest    -> *messages.ProviderResult
//	*messages.RunStatusRequest   -> *messages.RunStatus
//	*messages.QueueStatusRequest -> *messages.QueueStatus
//	*messages.ControlRequest     -> *messages.ProviderResult
//
// Scale-out is the seed's local scaler: it is serialized per runtime instance id prefix, counts
// the existing instances of the request's tenant scope only (same prefix and, for dedicated and
// hybrid tenants, owned by the tenant or its group; for shared tenants, shared instances), refuses
// with max-runtime-instances-reached at the tenant's MaxRuntimeInstances, otherwise creates the
// smallest free "<prefix>-<n>" (n >= 1) through the Host and waits until the instance reports
// status "ready" in the registry listing. Readiness is observed in the registry, never by probing
// the transport.
//
// Failures are structured results with the reasons documented in package providers.
//
// # Usage
//
//	p := local.New(local.Config{
//		System:    system,
//		Directory: instances,           // runtime instance id -> PID
//		Host:      host,                // nil: scale-out answers "no-scaler"
//		Instances: registry.ListAll,    // registry listing, for scale-out
//	})
//	if err := reg.Register(p); err != nil {
//		return fmt.Errorf("register local provider: %w", err)
//	}
package local
