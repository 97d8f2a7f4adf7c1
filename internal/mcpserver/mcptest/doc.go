// Package mcptest is the shared setup of the MCP server's tests (package mcpserver and the
// dair binary's `dair mcp` tests): a real node behind a real HTTP API with HS256 auth, MCP
// client sessions over streamable HTTP, and tool calls that fail the test on transport errors.
// Like net/http/httptest it is imported by tests only.
//
// # Usage
//
//	api := mcptest.StartAPI(t, "mcp-test", secret)
//	api.PutPipeline(t, "greet", greetYAML)
//	srv := httptest.NewServer(mcpserver.HTTPHandler(mcpserver.Config{Server: api.URL}))
//	cs := mcptest.ConnectHTTP(t, srv.URL, api.Token(t, "acme", auth.RoleTenant))
//	var sub httpapi.SubmitResponse
//	mcptest.CallOK(t, cs, mcpserver.ToolSubmitRun, map[string]any{"pipeline": "greet"}, &sub)
//	run := mcptest.WaitRun(t, cs, sub.SharedRunID)
package mcptest
