// Command dair is the dair runtime's binary: it serves a node (dev, node) and drives one over
// the HTTP API (submit, runs, instances, tenants, executions, pipelines, queue, agents, token).
// The command names, flags and exit codes are a contract (CONTRACT.md, "Commands").
//
// # Usage
//
//	dair dev --data ./.dair --http 127.0.0.1:8080 --pipelines ./pipelines
//	dair submit hello --tenant acme --input '{"name":"x"}' --wait
//	dair runs get run_123 -o json
//	dair agents send counter/page-1 --tenant acme --message '{}'
//
// Exit codes: 0 ok; 1 the operation failed (run failed, not found, rejected, replay
// diverged, server error); 2 bad usage or bad input. Errors are one line on stderr:
// "dair: <message>".
package main
