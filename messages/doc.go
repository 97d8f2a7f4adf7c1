// Package messages holds dair's protobuf messages: everything that crosses an actor, process or
// store boundary (tenant context snapshots, shared runs, capacity descriptors, dispatch and
// control requests, scale-out requests, ledger entries, execution and step state).
//
// # Usage
//
// The Go code is generated from dair.proto by `make proto` and committed. Construct messages as
// plain structs and marshal them with google.golang.org/protobuf/proto.
package messages

//go:generate protoc --go_out=. --go_opt=paths=source_relative dair.proto
