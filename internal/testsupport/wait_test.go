package testsupport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex // guards failed, msg
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fakeTB) result() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed, f.msg
}

func TestEventually_cases(t *testing.T) {
	tests := []struct {
		name     string
		trueAt   int32 // evaluation count at which cond turns true; 0 = never
		args     []any
		wantFail string
	}{
		{name: "immediately", trueAt: 1},
		{name: "after polls", trueAt: 4},
		{name: "never with format", args: []any{"want %d items", 3}, wantFail: "want 3 items"},
		{name: "never with values", args: []any{42, "x"}, wantFail: "42"},
		{name: "never bare", wantFail: "condition not met within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ftb := &fakeTB{TB: t}
			var calls atomic.Int32
			cond := func() bool {
				n := calls.Add(1)
				return tt.trueAt > 0 && n >= tt.trueAt
			}
			// A condition that turns true gets a deadline no loaded machine misses; one that
			// never does fails after 60ms.
			timeout := 60 * time.Millisecond
			if tt.trueAt > 0 {
				timeout = 10 * time.Second
			}
			Eventually(ftb, timeout, 5*time.Millisecond, cond, tt.args...)
			failed, msg := ftb.result()
			if tt.wantFail == "" && failed {
				t.Fatalf("unexpected failure: %s", msg)
			}
			if tt.wantFail != "" && (!failed || !strings.Contains(msg, tt.wantFail)) {
				t.Fatalf("failed=%v msg=%q, want failure containing %q", failed, msg, tt.wantFail)
			}
			if tt.trueAt > 0 && calls.Load() != tt.trueAt {
				t.Fatalf("calls = %d, want %d", calls.Load(), tt.trueAt)
			}
		})
	}
}

func TestEventuallyErr_cases(t *testing.T) {
	errNotYet := errors.New("not yet ready")
	tests := []struct {
		name     string
		okAt     int32
		args     []any
		wantFail string
	}{
		{name: "succeeds", okAt: 3},
		{name: "reports last error", wantFail: "not yet ready #"},
		{name: "describes the wait", args: []any{"get %s", "r1"}, wantFail: "get r1: not yet ready #"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ftb := &fakeTB{TB: t}
			var calls atomic.Int32
			timeout := 60 * time.Millisecond
			if tt.okAt > 0 {
				timeout = 10 * time.Second
			}
			EventuallyErr(ftb, timeout, func() error {
				n := calls.Add(1)
				if tt.okAt > 0 && n >= tt.okAt {
					return nil
				}
				return errors.Join(errNotYet, errors.New("#"+string(rune('0'+n%10))))
			}, tt.args...)
			failed, msg := ftb.result()
			if tt.wantFail == "" && failed {
				t.Fatalf("unexpected failure: %s", msg)
			}
			if tt.wantFail != "" && (!failed || !strings.Contains(strings.ReplaceAll(msg, "\n", " "), tt.wantFail)) {
				t.Fatalf("failed=%v msg=%q, want failure containing %q", failed, msg, tt.wantFail)
			}
		})
	}
}

func TestWaitFor_cases(t *testing.T) {
	errBroken := errors.New("broken")
	tests := []struct {
		name    string
		cond    func(n int) (bool, error)
		timeout time.Duration
		wantErr error
	}{
		{name: "true after polls", cond: func(n int) (bool, error) { return n >= 3, nil }, timeout: time.Second},
		{name: "cond error aborts", cond: func(n int) (bool, error) { return false, errBroken }, timeout: time.Second, wantErr: errBroken},
		{name: "context deadline", cond: func(int) (bool, error) { return false, nil }, timeout: 30 * time.Millisecond, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			n := 0
			err := WaitFor(ctx, 2*time.Millisecond, func() (bool, error) {
				n++
				return tt.cond(n)
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("WaitFor() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestWaitFor_canceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := WaitFor(ctx, 0, func() (bool, error) { return false, nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFor() = %v, want context.Canceled", err)
	}
}
