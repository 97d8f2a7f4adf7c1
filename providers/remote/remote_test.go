package remote

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeClock is a settable clock; after fires at once so backoff waits take no time.
type fakeClock struct {
	mu  sync.Mutex // guards now, waits
	now time.Time
	// waits records the backoff durations asked for.
	waits []time.Duration
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func newTestCaller(clk *fakeClock, attempts int) *Caller {
	return NewCaller(Config{Prefix: "http", Timeout: 50 * time.Millisecond, Attempts: attempts, Backoff: 10 * time.Millisecond,
		MaxBackoff: 25 * time.Millisecond, CircuitFailures: 4, CircuitOpenFor: time.Second, Now: clk.Now, After: clk.After})
}

func TestCaller_Call_classification(t *testing.T) {
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name      string
		op        string
		errs      []error // per attempt; nil = success
		attempt   func(ctx context.Context) error
		reason    string
		retryable bool
		attempts  int
	}{
		{name: "success", errs: []error{nil}, attempts: 1},
		{name: "retried then success", errs: []error{Fail(ClassFailed, nil), nil}, attempts: 2},
		{name: "non-retryable not retried", errs: []error{Fail(ClassNonRetryable, nil)}, reason: "http-command-non-retryable", attempts: 1},
		{name: "invalid response not retried", errs: []error{Fail(ClassInvalidResponse, nil)}, reason: "http-command-invalid-response", attempts: 1},
		{name: "endpoint invalid", errs: []error{Fail(ClassEndpointInvalid, nil)}, reason: "http-endpoint-invalid", attempts: 1},
		{name: "refused exhausted", errs: []error{refused, refused, refused}, retryable: true, attempts: 3,
			reason: "http-retry-exhausted: 3 attempts, last http-provider-unavailable"},
		{name: "dispatch hang exhausted", op: OpDispatch, attempt: hang, retryable: true, attempts: 3,
			reason: "http-retry-exhausted: 3 attempts, last http-dispatch-timeout"},
		{name: "command hang exhausted", op: OpCommand, attempt: hang, retryable: true, attempts: 3,
			reason: "http-retry-exhausted: 3 attempts, last http-command-timeout"},
		{name: "exception", errs: []error{errors.New("boom"), errors.New("boom"), errors.New("boom")}, retryable: true, attempts: 3,
			reason: "http-retry-exhausted: 3 attempts, last http-command-exception"},
		{name: "failed then non-retryable", errs: []error{Fail(ClassFailed, nil), Fail(ClassNonRetryable, nil)},
			reason: "http-command-non-retryable", attempts: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			c := newTestCaller(clk, 3)
			n := 0
			attempt := tc.attempt
			if attempt == nil {
				attempt = func(context.Context) error {
					err := tc.errs[n]
					n++
					return err
				}
			}
			out := c.Call(context.Background(), "http://x", tc.op, attempt)
			if out.Reason != tc.reason || out.Retryable != tc.retryable || out.Attempts != tc.attempts {
				t.Fatalf("outcome = %+v, want reason %q retryable %v attempts %d", out, tc.reason, tc.retryable, tc.attempts)
			}
			if out.OK() != (tc.reason == "") {
				t.Fatalf("OK() = %v", out.OK())
			}
			if tc.attempts > 1 && len(clk.waits) != tc.attempts-1 {
				t.Fatalf("backoff waits = %v, want %d", clk.waits, tc.attempts-1)
			}
		})
	}
}

func TestCaller_Call_endpointMissing(t *testing.T) {
	c := newTestCaller(&fakeClock{}, 3)
	out := c.Call(context.Background(), "", OpDispatch, func(context.Context) error {
		t.Fatal("attempted without an endpoint")
		return nil
	})
	if out.Reason != "http-endpoint-missing" || out.Retryable {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestCaller_Call_backoffDoublesUpToMax(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	c := NewCaller(Config{Prefix: "grpc", Attempts: 4, Backoff: 10 * time.Millisecond, MaxBackoff: 25 * time.Millisecond,
		CircuitFailures: 100, Now: clk.Now, After: clk.After})
	c.Call(context.Background(), "e", OpDispatch, func(context.Context) error { return Fail(ClassFailed, nil) })
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond}
	if len(clk.waits) != len(want) {
		t.Fatalf("waits = %v, want %v", clk.waits, want)
	}
	for i := range want {
		if clk.waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", clk.waits, want)
		}
	}
}

func TestCaller_Call_cancelled(t *testing.T) {
	c := newTestCaller(&fakeClock{}, 3)
	ctx, cancel := context.WithCancel(context.Background())
	out := c.Call(ctx, "e", OpDispatch, func(context.Context) error {
		cancel()
		return errors.New("write on closed connection")
	})
	if out.Reason != "http-command-cancelled" || !out.Retryable || out.Attempts != 1 {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestCaller_circuit(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCaller(clk, 2) // 2 attempts per call, circuit opens after 4 failed attempts
	calls := 0
	failing := func(context.Context) error { calls++; return Fail(ClassFailed, nil) }
	c.Call(context.Background(), "a", OpDispatch, failing)
	if c.Open("a") {
		t.Fatal("open after 2 failed attempts")
	}
	c.Call(context.Background(), "a", OpDispatch, failing)
	if !c.Open("a") || calls != 4 {
		t.Fatalf("open = %v after %d attempts", c.Open("a"), calls)
	}
	out := c.Call(context.Background(), "a", OpDispatch, failing)
	if out.Reason != "http-circuit-open" || !out.Retryable || out.Attempts != 0 || calls != 4 {
		t.Fatalf("open circuit: outcome %+v, calls %d", out, calls)
	}
	if out := c.Call(context.Background(), "b", OpDispatch, func(context.Context) error { return nil }); !out.OK() {
		t.Fatalf("other endpoint: %+v", out)
	}
	// Refusals do not open a circuit: the endpoint answers.
	for range 10 {
		c.Call(context.Background(), "c", OpDispatch, func(context.Context) error { return Fail(ClassNonRetryable, nil) })
	}
	if c.Open("c") {
		t.Fatal("refusals opened the circuit")
	}
	// Half-open: after the cool-down one trial goes through; a success closes the circuit.
	clk.advance(time.Second + time.Millisecond)
	if out := c.Call(context.Background(), "a", OpDispatch, func(context.Context) error { return nil }); !out.OK() {
		t.Fatalf("trial: %+v", out)
	}
	if c.Open("a") {
		t.Fatal("still open after a successful trial")
	}
}

func TestCaller_circuit_failedTrialReopens(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	c := NewCaller(Config{Prefix: "redis-command-queue", Attempts: 1, CircuitFailures: 1, CircuitOpenFor: time.Second,
		Now: clk.Now, After: clk.After})
	fail := func(context.Context) error { return Fail(ClassUnavailable, nil) }
	if out := c.Call(context.Background(), "q", OpDispatch, fail); out.Reason != "redis-command-queue-provider-unavailable" {
		t.Fatalf("first: %+v", out)
	}
	clk.advance(2 * time.Second)
	c.Call(context.Background(), "q", OpDispatch, fail)
	if out := c.Call(context.Background(), "q", OpDispatch, fail); !strings.HasSuffix(out.Reason, "-circuit-open") {
		t.Fatalf("after a failed trial: %+v", out)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Class
	}{
		{context.DeadlineExceeded, ClassTimeout},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ClassUnavailable},
		{syscall.ECONNRESET, ClassUnavailable},
		{Fail(ClassNonRetryable, nil), ClassNonRetryable},
		{errors.New("x"), ClassException},
	}
	for _, tc := range cases {
		got := Classify(tc.err).(*AttemptError)
		if got.Class != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got.Class, tc.want)
		}
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}
