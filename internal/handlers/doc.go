// Package handlers implements dair's built-in step handlers: echo, sleep, fail, http, llm.chat,
// agent.send and agent.publish. Each is a step.Handler; Register adds all of them to a
// step.Registry under the names pipelines use in `uses:`. The agent handlers reach the agent
// runtime of the node running the attempt through the attempt's context (WithAgents).
//
// The engine renders templates before it calls a handler, so a handler reads final values from
// Request.With. Numbers in With may be int, int64, float64 or json.Number; all are accepted.
//
// Errors follow the step contract: a failure that retrying cannot fix (bad `with` values, a 4xx
// answer other than 408 and 429) is wrapped with step.Permanent; everything else (transport
// errors, 408, 429, 5xx, an expired ctx) is returned plain so the engine may retry it.
//
// # Usage
//
//	reg := step.NewRegistry()
//	if err := handlers.Register(reg, handlers.Options{}); err != nil {
//		return err
//	}
//	h, _ := reg.Get("http")
//	res, err := h.Run(ctx, &step.Request{
//		Attempt:        1,
//		IdempotencyKey: "exec-1/fetch",
//		With:           map[string]any{"method": "GET", "url": "http://127.0.0.1:9000/doc"},
//	})
package handlers
