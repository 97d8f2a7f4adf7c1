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
