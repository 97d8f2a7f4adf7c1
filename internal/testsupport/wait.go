package testsupport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// defaultPollInterval is how often EventuallyErr re-runs its function.
const defaultPollInterval = 10 * time.Millisecond

// Eventually polls cond every `every` until it returns true, and fails the test with t.Fatalf
// if it has not within timeout. cond is called first immediately, always from the calling
// goroutine. msgAndArgs, if given, describe the condition: a format string and its arguments,
// or any values printed with fmt.Sprint.
func Eventually(t testing.TB, timeout, every time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	err := WaitFor(context.Background(), every, WithDeadline(timeout, func() (bool, error) {
		return cond(), nil
	}))
	if err != nil {
		t.Fatalf("condition not met within %v%s", timeout, describe(msgAndArgs))
	}
}

// EventuallyErr polls fn every 10ms until it returns nil and fails the test with the last
// error if it has not within timeout. fn is called first immediately, always from the calling
// goroutine. msgAndArgs, if given, describe what is awaited, as for Eventually.
func EventuallyErr(t testing.TB, timeout time.Duration, fn func() error, msgAndArgs ...any) {
	t.Helper()
	var last error
	err := WaitFor(context.Background(), defaultPollInterval, WithDeadline(timeout, func() (bool, error) {
		last = fn()
		return last == nil, nil
	}))
	if err != nil {
		t.Fatalf("still failing after %v%s: %v", timeout, describe(msgAndArgs), last)
	}
}

// WaitFor polls cond every `every` (first immediately) until it reports true, returns an error,
// or ctx is done. It blocks on the calling goroutine and returns nil when the condition holds,
// cond's error wrapped when cond fails, or an error wrapping ctx.Err() when ctx ends first.
// A non-positive every means 10ms.
func WaitFor(ctx context.Context, every time.Duration, cond func() (bool, error)) error {
	if every <= 0 {
		every = defaultPollInterval
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("testsupport: wait: %w", err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testsupport: wait: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

// ErrDeadline is returned by the condition WithDeadline returns when time is up.
var ErrDeadline = errors.New("testsupport: deadline passed")

// WithDeadline wraps cond for WaitFor so that a false evaluation made after timeout has elapsed
// ends the wait with ErrDeadline; cond is always evaluated once more at or after the deadline.
// The timeout starts when WithDeadline is called.
func WithDeadline(timeout time.Duration, cond func() (bool, error)) func() (bool, error) {
	deadline := time.Now().Add(timeout)
	return func() (bool, error) {
		ok, err := cond()
		if err != nil || ok {
			return ok, err
		}
		if !time.Now().Before(deadline) {
			return false, ErrDeadline
		}
		return false, nil
	}
}

func describe(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return ": " + fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return ": " + fmt.Sprint(msgAndArgs...)
}
