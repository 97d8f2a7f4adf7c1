// Package grpc is the "grpc" runtime instance provider and the runtime host's gRPC services:
// the typed command service runtime.v1.RuntimeInstanceService (dispatch, status, control,
// heartbeat, instance listing) and seed 001's runtime.v1.RuntimeService (Invoke, server
// streaming). Calls carry the shared hardening of package remote ("grpc-..." reasons).
//
// A runtime host serving gRPC publishes provider_name "grpc", transport_name "grpc" and
// endpoint "grpc://HOST:PORT" ("grpcs://" with TLS). Plaintext is meant for loopback; with a
// TLS configuration the server requires it (and client certificates when it has a CA).
//
// Status codes map to reasons: UNAVAILABLE is "grpc-provider-unavailable", DEADLINE_EXCEEDED a
// timeout, RESOURCE_EXHAUSTED, ABORTED, INTERNAL and UNKNOWN "grpc-command-failed" (retried);
// INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED and
// UNIMPLEMENTED "grpc-command-non-retryable" (not retried).
//
// Outbound calls made on a run's behalf carry the metadata x-tenant-id, x-org-id and x-user-id
// of its snapshot; Invoke requires x-tenant-id to match the request's snapshot.
//
// # Usage
//
//	p := grpc.New(grpc.Config{Remote: remote.Config{Timeout: 2 * time.Second}})
//	defer p.Close()
//	res := p.Dispatch(ctx, descriptor, req)
//
//	srv := grpc.NewServer(grpc.ServerConfig{Backend: localProvider, Instances: node.LocalInstanceIDs})
//	go srv.Serve(ln)
package grpc
