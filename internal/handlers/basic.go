package handlers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dairuntime/dair/internal/step"
)

// Echo returns the echo handler: its output is `with.value` (any JSON value), or null when
// value is absent. It never fails, is safe for concurrent use and is pure (step.Pure): the
// steps that need it do not wait for the write of its success.
func Echo() step.Handler {
	return step.Pure(step.HandlerFunc(func(_ context.Context, req *step.Request) (step.Result, error) {
		return step.Result{Output: req.With["value"]}, nil
	}))
}

// Sleep returns the sleep handler. `with.duration` is a Go duration string ("250ms") or a
// number of milliseconds; absent means 0. Run blocks on a timer until the duration passes
// (output {"slept": "<duration>"}) or ctx is done (an error wrapping ctx.Err()). The timer is
// stopped on return, so cancelled sleeps leave nothing behind. Safe for concurrent use.
func Sleep() step.Handler {
	return step.Checked(step.HandlerFunc(func(ctx context.Context, req *step.Request) (step.Result, error) {
		d, err := sleepDuration(req.With)
		if err != nil {
			return step.Result{}, err
		}
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return step.Result{}, fmt.Errorf("handlers: sleep %s: %w", d, ctx.Err())
			}
		} else if err := ctx.Err(); err != nil {
			return step.Result{}, fmt.Errorf("handlers: sleep %s: %w", d, err)
		}
		return step.Result{Output: map[string]any{"slept": d.String()}}, nil
	}), checkSleep)
}

// sleepDuration reads `with.duration` (absent: 0).
func sleepDuration(with map[string]any) (time.Duration, error) {
	var d time.Duration
	if v, ok := with["duration"]; ok && v != nil {
		var good bool
		if d, good = asDuration(v); !good {
			return 0, invalid(NameSleep, "duration must be a Go duration or milliseconds, got %v", v)
		}
	}
	if d < 0 {
		return 0, invalid(NameSleep, "negative duration %s", d)
	}
	return d, nil
}

// Fail returns the fail handler, used to exercise retries. It fails attempts 1..`with.times`
// (default 1) with an error wrapping ErrInjectedFailure whose text includes `with.message`,
// marked step.Permanent when `with.permanent` is true; later attempts succeed with output
// {"attempt": n}. Safe for concurrent use.
func Fail() step.Handler {
	return step.Checked(step.HandlerFunc(func(_ context.Context, req *step.Request) (step.Result, error) {
		times, msg, permanent, err := failArgs(req.With)
		if err != nil {
			return step.Result{}, err
		}
		if int64(req.Attempt) > times {
			return step.Result{Output: map[string]any{"attempt": req.Attempt}}, nil
		}
		if msg == "" {
			msg = "requested by pipeline"
		}
		ferr := fmt.Errorf("%w: attempt %d of %d: %s", ErrInjectedFailure, req.Attempt, times, msg)
		if permanent {
			return step.Result{}, step.Permanent(ferr)
		}
		return step.Result{}, ferr
	}), checkFail)
}

// failArgs reads `with.times` (default 1), `with.message` and `with.permanent`.
func failArgs(with map[string]any) (times int64, msg string, permanent bool, err error) {
	times = 1
	if v, ok := with["times"]; ok && v != nil {
		n, good := asInt64(v)
		if s, isStr := v.(string); isStr {
			parsed, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			n, good = parsed, perr == nil
		}
		if !good || n < 0 {
			return 0, "", false, invalid(NameFail, "times must be a non-negative integer, got %v", v)
		}
		times = n
	}
	if msg, err = optString(NameFail, with, "message"); err != nil {
		return 0, "", false, err
	}
	if v, ok := with["permanent"]; ok && v != nil {
		var good bool
		if permanent, good = asBool(v); !good {
			return 0, "", false, invalid(NameFail, "permanent must be a bool, got %v", v)
		}
	}
	return times, msg, permanent, nil
}
