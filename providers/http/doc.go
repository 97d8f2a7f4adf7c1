// Package http is the "http" runtime instance provider and the runtime host's HTTP command
// server: runtime commands (dispatch, status, control, heartbeat) as protobuf or JSON over
// HTTP/1.1, with the shared hardening of package remote (per-call timeout, bounded retries of
// retryable failures, a circuit per endpoint, "http-..." reasons).
//
// A runtime host serving HTTP publishes provider_name "http", transport_name "http" and
// endpoint "http://HOST:PORT" (https with TLS) in its instances' capacity descriptors; the
// control plane's router resolves this provider from that registration. One host may serve
// several instances (a pooled host: runtime-http-1..N); every command names its instance.
//
// # Endpoints
//
// Bodies are application/x-protobuf (the default of the provider) or application/json
// (protobuf JSON names); answers use the request's Content-Type.
//
//	POST /runtime-instance/commands    RuntimeCommand → RuntimeCommandResult (the envelope)
//	POST /runtime-instance/dispatch    DispatchRequest → ProviderResult
//	POST /runtime-instance/status      QueueStatusRequest → QueueStatus
//	POST /runtime-instance/run-status  RunStatusRequest → RunStatus
//	POST /runtime-instance/control     ControlRequest → ProviderResult
//	POST /runtime-instance/heartbeat   HeartbeatRequest → HeartbeatResponse
//	GET  /runtime-instance/instances   ListInstancesResponse
//
// A 200 carries the instance's answer, including its refusals (ok=false). 400 means a body
// that does not decode; 404 an instance this host does not serve; both are not retryable.
// The provider maps 408, 429 and 5xx to "http-command-failed" (retried) and other 4xx to
// "http-command-non-retryable" (not retried).
//
// Dispatch requests carry the tenant metadata headers x-tenant-id, x-org-id and x-user-id of
// the run's snapshot.
//
// # Usage
//
//	p := http.New(http.Config{Remote: remote.Config{Timeout: 2 * time.Second}})
//	res := p.Dispatch(ctx, descriptor, req)
//
//	srv := http.NewHandler(node.Providers() local provider, node.LocalInstanceIDs)
//	go (&nethttp.Server{Handler: srv}).Serve(ln)
package http
