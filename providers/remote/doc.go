// Package remote is the dispatch hardening every remote runtime instance provider shares (the
// http, grpc and redis-command-queue providers): a per-call timeout, bounded retries with
// backoff for retryable failures only, a circuit breaker per endpoint, and the classification
// of every failure into a structured reason code prefixed by the transport's name.
//
// A provider turns one operation into attempts: Caller.Call runs the attempt function under
// the per-attempt timeout, classifies what it returned (an *AttemptError with a Class, or nil),
// waits with exponential backoff and tries again while the failure is retryable and attempts
// are left. A non-retryable failure (the endpoint refused the command itself) is never retried.
// Every transport failure counts toward the endpoint's circuit; once Config.CircuitFailures
// attempts in a row failed, the circuit opens and calls fail at once with "<prefix>-circuit-open"
// for CircuitOpenFor, then one trial call is let through (half-open).
//
// # Reasons
//
// Reason codes are "<prefix>-<code>", the prefix being "http", "grpc" or
// "redis-command-queue" (seed 000's HTTP reasons, and their equivalents):
//
//	endpoint-missing          the descriptor names no endpoint (not retryable)
//	endpoint-invalid          the endpoint cannot be parsed or used (not retryable)
//	provider-unavailable      nothing answers at the endpoint: connection refused, no consumer (retryable)
//	dispatch-timeout          a dispatch attempt got no answer within the timeout (retryable)
//	command-timeout           a status, control or heartbeat attempt timed out (retryable)
//	command-failed            the endpoint answered a retryable failure (5xx, UNAVAILABLE) (retryable)
//	command-non-retryable     the endpoint refused the command (4xx, INVALID_ARGUMENT) (not retryable)
//	command-invalid-response  the answer could not be decoded (not retryable)
//	circuit-open              the endpoint's circuit is open: no attempt was made (retryable)
//	command-cancelled         the caller's context ended (retryable)
//	command-exception         any other local failure (retryable)
//	retry-exhausted           every attempt failed retryably; the reason reads
//	                          "<prefix>-retry-exhausted: N attempts, last <reason>" (retryable)
//
// # Usage
//
//	c := remote.NewCaller(remote.Config{Prefix: "http", Timeout: 2 * time.Second})
//	out := c.Call(ctx, endpoint, remote.OpDispatch, func(ctx context.Context) error {
//		res, err := send(ctx, endpoint, cmd)
//		if err != nil {
//			return remote.Classify(err) // timeout, unavailable or exception
//		}
//		answer = res
//		return nil
//	})
//	if !out.OK() {
//		return providers.Failure(name, id, op, out.Reason, out.Retryable)
//	}
package remote
