package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// Class is the kind of an attempt's failure.
type Class int

// Failure classes of one attempt.
const (
	// ClassException is a local failure that fits no other class (retryable).
	ClassException Class = iota
	// ClassUnavailable: nothing answered at the endpoint (retryable).
	ClassUnavailable
	// ClassTimeout: no answer within the attempt's timeout (retryable).
	ClassTimeout
	// ClassFailed: the endpoint answered a retryable failure (retryable).
	ClassFailed
	// ClassNonRetryable: the endpoint refused the command; retrying cannot help.
	ClassNonRetryable
	// ClassInvalidResponse: the answer could not be decoded (not retryable).
	ClassInvalidResponse
	// ClassEndpointInvalid: the endpoint cannot be used (not retryable).
	ClassEndpointInvalid
)

var classNames = [...]string{"exception", "unavailable", "timeout", "failed", "non-retryable", "invalid-response", "endpoint-invalid"}

// String returns the class's name.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("class(%d)", int(c))
	}
	return classNames[c]
}

// Retryable reports whether a failure of class c may succeed on another attempt.
func (c Class) Retryable() bool {
	return c != ClassNonRetryable && c != ClassInvalidResponse && c != ClassEndpointInvalid
}

// transport reports whether a failure of class c says the endpoint is unhealthy (it counts
// toward the circuit): the endpoint answering a refusal or garbage is alive.
func (c Class) transport() bool {
	return c == ClassUnavailable || c == ClassTimeout || c == ClassFailed || c == ClassException
}

// AttemptError is the failure of one attempt with its class. Attempt functions return it (or
// any error, which Classify turns into one).
type AttemptError struct {
	Class Class
	Err   error
}

func (e *AttemptError) Error() string {
	if e.Err == nil {
		return "remote: " + e.Class.String()
	}
	return "remote: " + e.Class.String() + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *AttemptError) Unwrap() error { return e.Err }

// Fail returns an *AttemptError of class c wrapping err.
func Fail(c Class, err error) *AttemptError { return &AttemptError{Class: c, Err: err} }

// Classify returns err as an *AttemptError: an *AttemptError as is; a deadline, a timeout
// net.Error as ClassTimeout; a refused or reset connection, or any other *net.OpError, as
// ClassUnavailable; anything else as ClassException. It returns nil for nil.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *AttemptError
	if errors.As(err, &ae) {
		return ae
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Fail(ClassTimeout, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return Fail(ClassUnavailable, err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return Fail(ClassUnavailable, err)
	}
	return Fail(ClassException, err)
}

// Ops a Caller distinguishes: a dispatch timeout is "dispatch-timeout", any other op's
// "command-timeout".
const (
	OpDispatch = "dispatch"
	OpCommand  = "command"
)

// Reason codes without their prefix; see the package documentation.
const (
	CodeEndpointMissing     = "endpoint-missing"
	CodeEndpointInvalid     = "endpoint-invalid"
	CodeProviderUnavailable = "provider-unavailable"
	CodeDispatchTimeout     = "dispatch-timeout"
	CodeCommandTimeout      = "command-timeout"
	CodeCommandFailed       = "command-failed"
	CodeNonRetryable        = "command-non-retryable"
	CodeInvalidResponse     = "command-invalid-response"
	CodeCircuitOpen         = "circuit-open"
	CodeCancelled           = "command-cancelled"
	CodeException           = "command-exception"
	CodeRetryExhausted      = "retry-exhausted"
)

// Defaults of Config's zero fields.
const (
	DefaultTimeout         = 5 * time.Second
	DefaultAttempts        = 3
	DefaultBackoff         = 50 * time.Millisecond
	DefaultMaxBackoff      = time.Second
	DefaultCircuitFailures = 5
	DefaultCircuitOpenFor  = 5 * time.Second
)

// Config configures a Caller. The zero value of each field means its default.
type Config struct {
	// Prefix is the transport's reason prefix ("http", "grpc", "redis-command-queue"). Required.
	Prefix string
	// Timeout bounds one attempt. Default 5s.
	Timeout time.Duration
	// Attempts bounds the attempts of one call (1 = no retry). Default 3.
	Attempts int
	// Backoff is the wait before the second attempt, doubled before each next one up to
	// MaxBackoff. Defaults 50ms and 1s.
	Backoff, MaxBackoff time.Duration
	// CircuitFailures is how many failed attempts in a row open an endpoint's circuit.
	// Default 5.
	CircuitFailures int
	// CircuitOpenFor is how long an open circuit fails calls before a trial. Default 5s.
	CircuitOpenFor time.Duration
	// Now is the breaker's clock. Default time.Now.
	Now func() time.Time
	// After returns a channel that fires after d (the backoff timer). Default time.After.
	After func(d time.Duration) <-chan time.Time
}

// Validate reports a missing prefix.
func (c Config) Validate() error {
	if c.Prefix == "" {
		return errors.New("remote: config: Prefix is required")
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Timeout, DefaultTimeout)
	def(&c.Backoff, DefaultBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.CircuitOpenFor, DefaultCircuitOpenFor)
	if c.Attempts <= 0 {
		c.Attempts = DefaultAttempts
	}
	if c.CircuitFailures <= 0 {
		c.CircuitFailures = DefaultCircuitFailures
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
	return c
}

// Outcome is the result of one Call.
type Outcome struct {
	// Reason is "" on success, else the prefixed reason code.
	Reason string
	// Retryable tells whether the operation may succeed later (elsewhere or after a wait).
	Retryable bool
	// Attempts is how many attempts were made (0 when the circuit was open or the endpoint
	// unusable).
	Attempts int
}

// OK reports whether the call succeeded.
func (o Outcome) OK() bool { return o.Reason == "" }

// Caller runs remote calls with the hardening of Config. It is goroutine-safe; one Caller
// serves every endpoint of a provider (each endpoint has its own circuit).
type Caller struct {
	cfg Config

	// mu guards circuits.
	mu       sync.Mutex
	circuits map[string]*circuit
}

// circuit is the breaker state of one endpoint.
type circuit struct {
	fails     int       // failed attempts in a row
	openUntil time.Time // zero: closed
	trial     bool      // a half-open trial call is in flight
}

// NewCaller returns a Caller; a Config without Prefix panics (a wiring bug).
func NewCaller(cfg Config) *Caller {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Caller{cfg: cfg.withDefaults(), circuits: map[string]*circuit{}}
}

// Prefix returns the caller's reason prefix.
func (c *Caller) Prefix() string { return c.cfg.Prefix }

// Timeout returns the per-attempt timeout.
func (c *Caller) Timeout() time.Duration { return c.cfg.Timeout }

// Reason returns the prefixed reason of code.
func (c *Caller) Reason(code string) string { return c.cfg.Prefix + "-" + code }

// Call runs attempt against endpoint with the per-attempt timeout, retrying retryable failures
// with backoff up to Attempts, unless the endpoint's circuit is open. op is OpDispatch or
// OpCommand (it names a timeout). It blocks until an attempt succeeds, the attempts are spent,
// or ctx ends, and never retries a non-retryable failure.
func (c *Caller) Call(ctx context.Context, endpoint, op string, attempt func(ctx context.Context) error) Outcome {
	if endpoint == "" {
		return Outcome{Reason: c.Reason(CodeEndpointMissing)}
	}
	backoff := c.cfg.Backoff
	var last string
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return Outcome{Reason: c.Reason(CodeCancelled), Retryable: true, Attempts: n - 1}
		}
		if !c.admit(endpoint) {
			return Outcome{Reason: c.Reason(CodeCircuitOpen), Retryable: true, Attempts: n - 1}
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := attempt(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil {
			c.record(endpoint, true)
			return Outcome{Attempts: n}
		}
		if ctx.Err() != nil {
			c.release(endpoint)
			return Outcome{Reason: c.Reason(CodeCancelled), Retryable: true, Attempts: n}
		}
		ae := Classify(err).(*AttemptError)
		if timedOut && ae.Class.Retryable() {
			ae.Class = ClassTimeout
		}
		c.record(endpoint, !ae.Class.transport())
		last = c.reason(ae.Class, op)
		if !ae.Class.Retryable() {
			return Outcome{Reason: last, Attempts: n}
		}
		if n >= c.cfg.Attempts {
			if n == 1 {
				return Outcome{Reason: last, Retryable: true, Attempts: n}
			}
			return Outcome{Reason: fmt.Sprintf("%s: %d attempts, last %s", c.Reason(CodeRetryExhausted), n, last), Retryable: true, Attempts: n}
		}
		select {
		case <-ctx.Done():
			return Outcome{Reason: c.Reason(CodeCancelled), Retryable: true, Attempts: n}
		case <-c.cfg.After(backoff):
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// reason maps a failure class to its prefixed reason.
func (c *Caller) reason(cl Class, op string) string {
	switch cl {
	case ClassUnavailable:
		return c.Reason(CodeProviderUnavailable)
	case ClassTimeout:
		if op == OpDispatch {
			return c.Reason(CodeDispatchTimeout)
		}
		return c.Reason(CodeCommandTimeout)
	case ClassFailed:
		return c.Reason(CodeCommandFailed)
	case ClassNonRetryable:
		return c.Reason(CodeNonRetryable)
	case ClassInvalidResponse:
		return c.Reason(CodeInvalidResponse)
	case ClassEndpointInvalid:
		return c.Reason(CodeEndpointInvalid)
	default:
		return c.Reason(CodeException)
	}
}

// admit reports whether a call may go to endpoint now: its circuit is closed, or open past its
// cool-down with no trial in flight (this call becomes the trial).
func (c *Caller) admit(endpoint string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cb := c.circuits[endpoint]
	if cb == nil || cb.openUntil.IsZero() {
		return true
	}
	if c.cfg.Now().Before(cb.openUntil) || cb.trial {
		return false
	}
	cb.trial = true
	return true
}

// record notes an attempt's outcome for endpoint's circuit (healthy: the endpoint answered).
func (c *Caller) record(endpoint string, healthy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cb := c.circuits[endpoint]
	if healthy {
		delete(c.circuits, endpoint)
		return
	}
	if cb == nil {
		cb = &circuit{}
		c.circuits[endpoint] = cb
	}
	cb.fails++
	cb.trial = false
	if cb.fails >= c.cfg.CircuitFailures {
		cb.openUntil = c.cfg.Now().Add(c.cfg.CircuitOpenFor)
	}
}

// release ends a trial whose call was cancelled without an outcome.
func (c *Caller) release(endpoint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cb := c.circuits[endpoint]; cb != nil {
		cb.trial = false
	}
}

// Open reports whether endpoint's circuit is open now.
func (c *Caller) Open(endpoint string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cb := c.circuits[endpoint]
	return cb != nil && !cb.openUntil.IsZero() && c.cfg.Now().Before(cb.openUntil)
}

// budget is the longest a call may take: every attempt's timeout and the backoff between them.
func (c *Caller) budget() time.Duration {
	total, b := time.Duration(0), c.cfg.Backoff
	for n := 0; n < c.cfg.Attempts; n++ {
		total += c.cfg.Timeout
		if n > 0 {
			total += b
			b = min(2*b, c.cfg.MaxBackoff)
		}
	}
	return total
}
