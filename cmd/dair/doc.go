// Command dair is the dair runtime's binary: it serves a node (dev, node) and drives one over
// the HTTP API (submit, runs, instances, tenants, executions, pipelines, queue, cluster, agents,
// token), and serves local stand-ins for the example pipelines (standin). The command names,
// flags and exit codes are a contract (CONTRACT.md, "Commands").
//
// # Usage
//
//	dair dev --data ./.dair --http 127.0.0.1:8080 --pipelines ./pipelines
//	dair submit hello --tenant acme --input '{"name":"x"}' --wait
//	dair runs get run_123 -o json
//	dair agents send counter/page-1 --tenant acme --message '{}'
//	dair runs watch run_123
//	dair pipelines check pipelines/hello.yaml --last 50
//
// Exit codes: 0 ok; 1 the operation failed (run failed, not found, rejected, replay
// diverged, server error); 2 bad usage or bad input. Errors are one line on stderr:
// "dair: <message>", followed by a hint of what to do next when there is one ("run \"dair
// runs list\"", "is a node running at URL? start one with \"dair dev\"").
package main
