package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/testsupport"
)

// Eventually polls cond every `every` until it returns true, and fails the test with t.Fatalf
// if it has not within timeout. cond is called first immediately, always from the calling
// goroutine. msgAndArgs, if given, describe the condition: a format string and its arguments,
// or any values printed with fmt.Sprint.
func Eventually(t testing.TB, timeout, every time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	testsupport.Eventually(t, timeout, every, cond, msgAndArgs...)
}

// EventuallyErr polls fn every 10ms until it returns nil and fails the test with the last
// error if it has not within timeout. fn is called first immediately, always from the calling
// goroutine. msgAndArgs, if given, describe what is awaited, as for Eventually.
func EventuallyErr(t testing.TB, timeout time.Duration, fn func() error, msgAndArgs ...any) {
	t.Helper()
	testsupport.EventuallyErr(t, timeout, fn, msgAndArgs...)
}

// WaitFor polls cond every `every` (first immediately) until it reports true, returns an error,
// or ctx is done. It blocks on the calling goroutine and returns nil when the condition holds,
// cond's error wrapped when cond fails, or an error wrapping ctx.Err() when ctx ends first.
// A non-positive every means 10ms.
func WaitFor(ctx context.Context, every time.Duration, cond func() (bool, error)) error {
	return testsupport.WaitFor(ctx, every, cond)
}
