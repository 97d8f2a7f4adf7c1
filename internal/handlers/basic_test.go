package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dairuntime/dair/internal/step"
)

func run(ctx context.Context, h step.Handler, attempt int, with map[string]any) (step.Result, error) {
	return h.Run(ctx, &step.Request{
		ExecutionID:    "exec-1",
		StepID:         "s1",
		Attempt:        attempt,
		IdempotencyKey: "exec-1/s1",
		With:           with,
	})
}

// wantInvalid fails t unless err is a permanent ErrInvalidArgument.
func wantInvalid(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidArgument) || !step.IsPermanent(err) {
		t.Fatalf("want permanent ErrInvalidArgument, got %v", err)
	}
}

func TestEcho_Run_values(t *testing.T) {
	cases := []struct {
		name string
		with map[string]any
		want any
	}{
		{"missing", map[string]any{}, nil},
		{"nil with", nil, nil},
		{"string", map[string]any{"value": "hi"}, "hi"},
		{"map", map[string]any{"value": map[string]any{"a": 1.0}}, map[string]any{"a": 1.0}},
		{"list", map[string]any{"value": []any{1, "x"}}, []any{1, "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(context.Background(), Echo(), 1, tc.with)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !reflect.DeepEqual(res.Output, tc.want) {
				t.Fatalf("output = %#v, want %#v", res.Output, tc.want)
			}
		})
	}
}

func TestSleep_Run_durations(t *testing.T) {
	cases := []struct {
		name    string
		with    map[string]any
		want    string
		wantErr bool
	}{
		{"go duration", map[string]any{"duration": "20ms"}, "20ms", false},
		{"int millis", map[string]any{"duration": 15}, "15ms", false},
		{"int64 millis", map[string]any{"duration": int64(5)}, "5ms", false},
		{"float millis", map[string]any{"duration": 2.5}, "2.5ms", false},
		{"json number", map[string]any{"duration": json.Number("3")}, "3ms", false},
		{"numeric string", map[string]any{"duration": "4"}, "4ms", false},
		{"missing", map[string]any{}, "0s", false},
		{"bad string", map[string]any{"duration": "soon"}, "", true},
		{"negative", map[string]any{"duration": "-1s"}, "", true},
		{"bool", map[string]any{"duration": true}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := run(context.Background(), Sleep(), 1, tc.with)
			if tc.wantErr {
				wantInvalid(t, err)
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !reflect.DeepEqual(res.Output, map[string]any{"slept": tc.want}) {
				t.Fatalf("output = %#v, want slept %s", res.Output, tc.want)
			}
			d, err := time.ParseDuration(tc.want)
			if err != nil {
				t.Fatalf("parse want: %v", err)
			}
			if el := time.Since(start); el < d {
				t.Fatalf("returned after %s, want >= %s", el, d)
			}
		})
	}
}

func TestSleep_Run_cancel(t *testing.T) {
	cases := []struct {
		name     string
		duration any
		ctx      func() (context.Context, context.CancelFunc)
		want     error
	}{
		{"deadline", "1h", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", "1h", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"already done zero duration", 0, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := run(ctx, Sleep(), 1, map[string]any{"duration": tc.duration})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if step.IsPermanent(err) {
				t.Fatalf("cancellation must not be permanent: %v", err)
			}
			if el := time.Since(start); el > 10*time.Second {
				t.Fatalf("sleep ignored ctx for %s", el)
			}
		})
	}
}

func TestSleep_Run_noLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	h := Sleep()
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := h.Run(ctx, &step.Request{Attempt: 1, With: map[string]any{"duration": "1h"}})
			errs <- err
		})
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	}
}

func TestFail_Run_attempts(t *testing.T) {
	cases := []struct {
		name      string
		with      map[string]any
		attempt   int
		wantErr   bool
		permanent bool
		msg       string
	}{
		{"default fails first", map[string]any{}, 1, true, false, "attempt 1 of 1"},
		{"default succeeds second", map[string]any{}, 2, false, false, ""},
		{"times 3 attempt 3", map[string]any{"times": 3}, 3, true, false, "attempt 3 of 3"},
		{"times float attempt 4", map[string]any{"times": 3.0}, 4, false, false, ""},
		{"times json number", map[string]any{"times": json.Number("2")}, 2, true, false, ""},
		{"times string", map[string]any{"times": "2"}, 3, false, false, ""},
		{"times zero", map[string]any{"times": int64(0)}, 1, false, false, ""},
		{"message", map[string]any{"message": "boom"}, 1, true, false, "boom"},
		{"permanent", map[string]any{"permanent": true, "times": 5}, 1, true, true, ""},
		{"permanent string", map[string]any{"permanent": "true"}, 1, true, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(context.Background(), Fail(), tc.attempt, tc.with)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if !reflect.DeepEqual(res.Output, map[string]any{"attempt": tc.attempt}) {
					t.Fatalf("output = %#v", res.Output)
				}
				return
			}
			if !errors.Is(err, ErrInjectedFailure) {
				t.Fatalf("err = %v, want ErrInjectedFailure", err)
			}
			if step.IsPermanent(err) != tc.permanent {
				t.Fatalf("permanent = %v, want %v", step.IsPermanent(err), tc.permanent)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %q does not mention %q", err, tc.msg)
			}
		})
	}
}

func TestFail_Run_invalid(t *testing.T) {
	cases := []struct {
		name string
		with map[string]any
	}{
		{"negative times", map[string]any{"times": -1}},
		{"fractional times", map[string]any{"times": 1.5}},
		{"bad string times", map[string]any{"times": "2x"}},
		{"message not string", map[string]any{"message": 3}},
		{"permanent not bool", map[string]any{"permanent": 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(context.Background(), Fail(), 1, tc.with)
			wantInvalid(t, err)
		})
	}
}

func BenchmarkSleep_Run_concurrent(b *testing.B) {
	h := Sleep()
	with := map[string]any{"duration": "1ms"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Run(context.Background(), &step.Request{Attempt: 1, With: with}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
