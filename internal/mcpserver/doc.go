// Package mcpserver is dair's Model Context Protocol server: the runtime control plane for
// agents. It exposes a running dair node as MCP tools over stdio or streamable HTTP.
//
// Every tool calls the node's HTTP API through package client, so authorization is exactly
// the API's: the caller's bearer token is forwarded and the node decides. Over stdio the
// token is Config.Token (the `dair mcp --token` flag or DAIR_TOKEN). Over HTTP each MCP
// request's own "Authorization: Bearer" header is forwarded with the node calls it makes;
// Config.Token is only used for requests that send no Authorization header, and only with
// Config.Auth "none" (ListenAndServe then insists on a loopback address). With Config.Auth
// "jwt" a request without a bearer token is answered 401 and Config.Token is never used.
//
// Tools (inputs are JSON objects; their schemas come from the XxxInput types):
//
//	submit_run          {pipeline, tenant_id?, input?, correlation_id?, idempotency_key?, wait?}
//	get_run, cancel_run, pause_run, resume_run      {shared_run_id}
//	list_runs           {tenant_id?, status?, pipeline?, limit?} (summaries, newest first, default 20)
//	list_pipelines      {}
//	get_pipeline        {key}
//	list_instances      {tenant_id?}
//	pause_instance, resume_instance, drain_instance {runtime_instance_id}
//	drain_shared_queue  {}
//	get_tenant          {tenant_id}
//	put_tenant          {tenant_id, isolation_mode, prefer_dedicated_capacity?, ...}
//	get_ledger, get_trace, replay_execution         {execution_id}
//	list_agents         {}
//	send_agent_message  {agent: TYPE/KEY, message, tenant_id?, timeout?}
//	publish_message     {topic: TYPE or TYPE/SOURCE, message, tenant_id?}
//
// A successful result carries the API's JSON answer as structured content and a one-line
// text summary. When the node refuses a call (401, 403, 404, 409, 423, ...) or cannot be
// reached, the result has IsError set, its text reads "<code>: <message> (HTTP <status>)"
// and its structured content is a ToolError; the MCP session itself stays healthy.
//
// # Usage
//
// Over stdio, as `dair mcp --server URL --token T` does:
//
//	err := mcpserver.RunStdio(ctx, mcpserver.Config{Server: url, Token: token, Logger: log})
//
// Over streamable HTTP, as `dair mcp --http ADDR` does:
//
//	err := mcpserver.ListenAndServe(ctx, "127.0.0.1:8090", mcpserver.Config{Server: url}, nil)
//
// or mount mcpserver.HTTPHandler(cfg) on a mux of your own, and use mcpserver.New(cfg) with
// any other go-sdk transport.
package mcpserver
