// Package dairtest shows how a module of your own tests against dair with package testkit:
// its test builds the dair binary (listed as a tool in go.mod), starts a two-node cluster of
// real `dair node` processes on a real redis-server, submits a run through the public HTTP
// client, kills the node that runs it and polls until the run finishes on the other node.
//
// # Usage
//
//	cd examples/testkit-module && go test -race -count=1 ./...
package dairtest
