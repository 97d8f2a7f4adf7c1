// Package dair is the Go library API of dair, the Deterministic AI Runtime: start a node from a
// Config, register step handlers and pipelines, submit runs and await their results. The node
// runs every run durably: steps are committed under a fencing epoch, a crashed execution is
// restarted and rehydrated, and a killed node's runs resume with the same ExecutionId.
//
// # Usage
//
//	st, _ := dair.OpenStore(ctx, "bolt://./.dair/dair.db")
//	node, _ := dair.Start(ctx, dair.Config{Store: st})
//	defer node.Stop(ctx)
//	_ = node.Handlers().Register("greet", dair.HandlerFunc(greet))
//	_, _ = node.PutPipeline(ctx, pipelineYAML)
//	run, _ := node.Submit(ctx, dair.SubmitRequest{Pipeline: "hello", Snapshot: dair.Tenant("acme")})
//	done, _ := node.Await(ctx, run.SharedRunId)
package dair

import (
	"context"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/server"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Re-exported engine types.
type (
	// Config configures a node; see actors.Config for every field and its default.
	Config = actors.Config
	// Node is a running node.
	Node = actors.Node
	// SubmitRequest is one run submission.
	SubmitRequest = actors.SubmitRequest
	// Store is the durable state a node runs on.
	Store = store.Store
	// Handler runs one step attempt.
	Handler = step.Handler
	// HandlerFunc adapts a function to Handler.
	HandlerFunc = step.HandlerFunc
	// Request is one step attempt's input.
	Request = step.Request
	// Result is a step attempt's output.
	Result = step.Result
)

// Start starts a node. It returns once the node's supervision tree is up.
func Start(ctx context.Context, cfg Config) (*Node, error) { return actors.Start(ctx, cfg) }

// Tenant returns an ExecutionContextSnapshot for a tenant, for library callers that have
// already authenticated their caller.
func Tenant(id string) *messages.ExecutionContextSnapshot {
	return &messages.ExecutionContextSnapshot{TenantId: id, Source: "library", Roles: []string{messages.RoleTenant}}
}

// OpenStore opens a store by URL: "bolt://PATH" (the embedded single-file store, one process)
// or "redis://HOST:PORT/DB" (shared by a cluster). The caller closes it.
func OpenStore(ctx context.Context, url string) (Store, error) { return server.OpenStore(ctx, url) }
