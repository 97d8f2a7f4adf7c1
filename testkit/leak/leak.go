// Package leak holds goleak options for dair's tests. It imports nothing of dair, so any
// package's tests can use it without an import cycle through testkit.
//
// # Usage
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leak.Protoactor()...) }
package leak

import "go.uber.org/goleak"

// Protoactor ignores protoactor-go's dead-letter throttle timer goroutine, which outlives an
// actor system by up to a second under different function names.
func Protoactor() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewThrottle.func1.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewThrottleWithLogger.func1.1"),
	}
}

// ProtoactorReconnects ignores what protoactor-go leaves behind when a remote keeps trying to
// reach a peer that stopped first (in-process nodes stopped one after the other, as benchmarks
// do): an endpoint writer sleeping between its connection attempts (2 s each, 5 of them, inside
// the actor; nothing cancels them), the graceful remote stop that waits for that writer in the
// background (cluster's bounded stop returns without it), and the gRPC client connection of
// every failed attempt, which its writer dials anew without closing the previous one (those are
// never closed), with the stream watcher of the stream that was open on it.
func ProtoactorReconnects() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointWriter).initialize"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointManager).stopSupervisor"),
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc.(*ccBalancerWrapper).updateClientConnState"),
		goleak.IgnoreTopFunction("google.golang.org/grpc.newClientStreamWithParams.func4"),
	}
}

// PendingDispatches ignores the goroutine of a local dispatch request whose caller gave up (its
// context ended: a node stopped with a delivery in flight, as a benchmark stops a node with
// runs still queued): it waits for protoactor's future, which has no cancel, and ends at the
// request timeout.
func PendingDispatches() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/dairuntime/dair/providers/local.(*Provider).request.func1")}
}
