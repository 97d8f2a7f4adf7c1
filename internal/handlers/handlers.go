package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dairuntime/dair/internal/dag"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/dairuntime/dair/internal/step"
)

// Handler names under which Register adds the built-in handlers.
const (
	NameEcho    = "echo"
	NameSleep   = "sleep"
	NameFail    = "fail"
	NameHTTP    = "http"
	NameLLMChat = "llm.chat"
)

// DefaultMaxBodyBytes is the response body limit used when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes int64 = 10 << 20

// DefaultLLMBaseURL is the llm.chat base URL used when `with.base_url` is empty.
const DefaultLLMBaseURL = "https://api.openai.com/v1"

// LLMAPIKeyEnv is the environment variable llm.chat reads its API key from when
// Options.LLMAPIKey is empty.
const LLMAPIKeyEnv = "DAIR_LLM_API_KEY"

var (
	// ErrInvalidArgument is returned (wrapped with step.Permanent) by every handler when a
	// `with` value is missing, of the wrong type or out of range.
	ErrInvalidArgument = errors.New("handlers: invalid argument")
	// ErrInjectedFailure is returned by fail for each of its first `with.times` attempts.
	ErrInjectedFailure = errors.New("handlers: injected failure")
	// ErrStatus is returned by http and llm.chat when the server answers with a non-2xx status.
	// 408, 429 and 5xx are retryable; other statuses are wrapped with step.Permanent.
	ErrStatus = errors.New("handlers: unexpected status")
	// ErrBodyTooLarge is returned (wrapped with step.Permanent) by http and llm.chat when a
	// response body exceeds Options.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("handlers: response body too large")
	// ErrBadResponse is returned by llm.chat when a 2xx answer is not a chat completion.
	ErrBadResponse = errors.New("handlers: malformed response")
	// ErrNoAgentRuntime is returned by agent.send and agent.publish when the attempt's context
	// carries no agent runtime (WithAgents): the node's has not started yet or is stopping.
	ErrNoAgentRuntime = errors.New("handlers: no agent runtime")
	// ErrAgentTimeout is returned by agent.send for a timeout outcome.
	ErrAgentTimeout = errors.New("handlers: agent timeout")
	// ErrAgentUndeliverable is returned by agent.send for an undeliverable outcome (wrapped
	// with step.Permanent when the tenant may not reach the agent).
	ErrAgentUndeliverable = errors.New("handlers: agent undeliverable")
	// ErrAgentFailed is returned by agent.send for an error outcome (the agent's handler
	// failed).
	ErrAgentFailed = errors.New("handlers: agent error")
)

// Options configures the http and llm.chat handlers. The zero value is ready to use.
type Options struct {
	// HTTPClient sends requests. Default: a client with pooled connections and no global
	// timeout; the step timeout arrives through ctx.
	HTTPClient *http.Client
	// LLMAPIKey is sent as a bearer token by llm.chat. Default: the value of
	// DAIR_LLM_API_KEY, read at each call; no Authorization header when both are empty.
	LLMAPIKey string
	// MaxBodyBytes bounds response bodies; a larger body fails the attempt. Default: 10 MiB.
	MaxBodyBytes int64
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		o.HTTPClient = defaultClient()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return o
}

// defaultClient returns a client with a private pooled transport and no global timeout.
func defaultClient() *http.Client {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// Register adds echo, sleep, fail, http, llm.chat, agent.send and agent.publish to reg. The
// http and llm.chat handlers share one HTTP client; the agent handlers use the agent runtime
// the node puts in each attempt's context (WithAgents). It returns an error wrapping
// step.ErrDuplicateHandler if a name is already taken; handlers registered before the failure
// stay registered.
func Register(reg *step.Registry, opts Options) error {
	if reg == nil {
		return fmt.Errorf("handlers: register: nil registry")
	}
	opts = opts.withDefaults()
	all := []struct {
		name string
		h    step.Handler
	}{
		{NameEcho, Echo()},
		{NameSleep, Sleep()},
		{NameFail, Fail()},
		{NameHTTP, HTTP(opts)},
		{NameLLMChat, LLMChat(opts)},
		{NameAgentSend, AgentSend()},
		{NameAgentPublish, AgentPublish()},
	}
	for _, e := range all {
		if err := reg.Register(e.name, e.h); err != nil {
			return fmt.Errorf("handlers: register built-ins: %w", err)
		}
	}
	return nil
}

// invalid returns a permanent ErrInvalidArgument error for handler name.
func invalid(name, format string, args ...any) error {
	return step.Permanent(fmt.Errorf("%w: %s: %s", ErrInvalidArgument, name, fmt.Sprintf(format, args...)))
}

// asInt64 converts a decoded number to int64; ok is false for non-numbers and non-integers.
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint:
		return int64(n), n <= math.MaxInt64
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case float32:
		return asInt64(float64(n))
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt64 || n < math.MinInt64 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		return asInt64(f)
	}
	return 0, false
}

// asFloat64 converts a decoded number to float64; ok is false for non-numbers.
func asFloat64(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	if i, ok := asInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}

// asDuration converts a Go duration string or a number of milliseconds to a duration.
func asDuration(v any) (time.Duration, bool) {
	if s, ok := v.(string); ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			ms, perr := strconv.ParseFloat(s, 64)
			if perr != nil {
				return 0, false
			}
			return time.Duration(ms * float64(time.Millisecond)), true
		}
		return d, true
	}
	if i, ok := asInt64(v); ok {
		if i > math.MaxInt64/int64(time.Millisecond) {
			return 0, false
		}
		return time.Duration(i) * time.Millisecond, true
	}
	if f, ok := asFloat64(v); ok {
		if f*float64(time.Millisecond) > math.MaxInt64 {
			return 0, false
		}
		return time.Duration(f * float64(time.Millisecond)), true
	}
	return 0, false
}

// asBool accepts a bool or the strings "true"/"false" (templates render to strings).
func asBool(v any) (bool, bool) {
	switch b := v.(type) {
	case bool:
		return b, true
	case string:
		p, err := strconv.ParseBool(b)
		return p, err == nil
	}
	return false, false
}

// optString returns with[key] as a string; absent or nil gives "", a non-string is an error.
func optString(name string, with map[string]any, key string) (string, error) {
	v, ok := with[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid(name, "%s must be a string, got %s", key, dag.KindOf(v))
	}
	return s, nil
}
