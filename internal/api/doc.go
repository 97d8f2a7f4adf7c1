// Package api is the dair HTTP API: run submission and control, Server-Sent Event streams of a
// run's durable ledger, runtime instances, tenant settings, execution history, pipeline
// definitions, agent messaging (agents.go: list, send, publish), health and Prometheus metrics
// (CONTRACT.md, "HTTP API", prefix /v1).
//
// The JSON views it reads and writes are the types of package httpapi, the wire format shared
// with clients. Errors are {"error": {"code", "message"}} with 400 for bad input, 401
// unauthenticated, 403 forbidden, 404 unknown id, 409 control of a run that is not running,
// 413 oversize body and 423 suspended tenant.
//
// With a Verifier, every /v1 request needs "Authorization: Bearer <jwt>": a tenant acts on its
// own tenant only, an operator also on instances, the queue and every tenant, an admin also on
// tenants and pipelines. A submission's tenant context comes from the token, never from the
// body. Without a Verifier every caller is an admin and names its tenant in the request.
// /healthz, /readyz and /metrics need no token.
//
// # Usage
//
//	h := api.New(api.Config{Node: node, Auth: verifier, Logger: log})
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h, ReadHeaderTimeout: 10 * time.Second}
//	go srv.ListenAndServe()
//
// Event streams (GET /v1/runs/{id}/events) send "id: <seq>", "event: <kind>" and
// "data: <httpapi.LedgerEntry JSON>" per ledger entry and end after run_succeeded, run_failed or
// run_cancelled; a client resumes with the Last-Event-ID header and gets exactly the entries
// it missed.
package api
