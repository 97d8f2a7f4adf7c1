// Package step defines the step handler contract: what a registered handler receives, what it
// returns, and the registry that maps a pipeline's `uses` name to a handler.
//
// # Usage
//
//	reg := step.NewRegistry()
//	err := reg.Register("echo", step.HandlerFunc(func(ctx context.Context, r *step.Request) (step.Result, error) {
//		return step.Result{Output: r.With["value"]}, nil
//	}))
package step

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/dairuntime/dair/messages"
)

// Request is one attempt of one step. Handlers must not retain it past Run.
type Request struct {
	ExecutionID string
	SharedRunID string
	StepID      string
	TenantID    string
	// Attempt counts from 1.
	Attempt int
	// IdempotencyKey is "<execution_id>/<step_id>": the same for every attempt of a step, across
	// restarts and recoveries, so side effects can be de-duplicated downstream.
	IdempotencyKey string
	// With is the step's `with` map after template rendering.
	With map[string]any
	// Snapshot is the run's tenant context, as submitted.
	Snapshot *messages.ExecutionContextSnapshot
}

// Usage is what a handler reports it consumed (LLM tokens).
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
}

// Result is a successful attempt's output. Output must marshal to JSON.
type Result struct {
	Output any
	Usage  Usage
}

// Handler runs one step attempt. Run blocks until the attempt ends or ctx is done (timeout,
// cancel, pause); it is called from many goroutines at once. A panic fails only that attempt.
type Handler interface {
	Run(ctx context.Context, req *Request) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (Result, error)

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, req *Request) (Result, error) { return f(ctx, req) }

// Pure marks h as a pure handler: its output is a function of the request's With, TenantID and
// ExecutionID alone (the same request gives the same result), and it has no side effect. The
// engine then starts the steps that need a pure step as soon as its success is on its way to
// the store, without waiting for the write: a crash that loses the write runs the step again,
// which gives the same output. Wrap only what is truly pure (a transform, a template);
// anything that calls out, reads a clock or draws a random number is not.
func Pure(h Handler) Handler { return pureHandler{h} }

// IsPure reports whether h was marked with Pure.
func IsPure(h Handler) bool {
	_, ok := h.(pureHandler)
	return ok
}

type pureHandler struct{ Handler }

// PermanentError marks a failure that retrying cannot fix; the engine stops retrying the step.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so the engine does not retry it.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// MaxOutputBytes bounds the JSON of one step's output (room for an http step's largest body,
// 10 MiB by default, as text and parsed): a larger output fails the step permanently, so
// templates that copy outputs into outputs cannot grow a run past what the store and its
// readers can hold.
const MaxOutputBytes = 32 << 20

// ErrDuplicateHandler is returned by Register when the name is taken.
var ErrDuplicateHandler = errors.New("step: duplicate handler name")

// Registry maps handler names to handlers. It is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex // guards m
	m  map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: make(map[string]Handler)} }

// Register adds h under name; a taken name returns ErrDuplicateHandler.
func (r *Registry) Register(name string, h Handler) error {
	if name == "" || h == nil {
		return fmt.Errorf("step: register: empty name or nil handler")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[name]; ok {
		return fmt.Errorf("register %q: %w", name, ErrDuplicateHandler)
	}
	r.m[name] = h
	return nil
}

// Get returns the handler registered under name.
func (r *Registry) Get(name string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.m[name]
	return h, ok
}

// Pure reports whether the handler registered under name is pure (see Pure).
func (r *Registry) Pure(name string) bool {
	h, ok := r.Get(name)
	return ok && IsPure(h)
}

// Has reports whether name is registered (the dag validator's known-handler check).
func (r *Registry) Has(name string) bool {
	_, ok := r.Get(name)
	return ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for n := range r.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// WithChecker is implemented by handlers that check a step's `with` when its pipeline is
// stored, so a definition that can only fail is refused then, not at its first run. CheckWith
// returns the first bad field's name and what is wrong with it. A value holding a template
// ("{{ ... }}") is known only at run time: CheckWith must let it pass.
type WithChecker interface {
	CheckWith(with map[string]any) (field string, err error)
}

// Checked returns h with check as its WithChecker.
func Checked(h Handler, check func(with map[string]any) (field string, err error)) Handler {
	return checkedHandler{h, check}
}

type checkedHandler struct {
	Handler
	check func(map[string]any) (string, error)
}

func (c checkedHandler) CheckWith(with map[string]any) (string, error) { return c.check(with) }

// CheckWith checks with against the handler registered as name, when that handler is a
// WithChecker (a pure one included); any other handler, or an unknown name, passes.
func (r *Registry) CheckWith(name string, with map[string]any) (field string, err error) {
	h, ok := r.Get(name)
	if p, pure := h.(pureHandler); pure {
		h = p.Handler
	}
	if c, can := h.(WithChecker); ok && can {
		return c.CheckWith(with)
	}
	return "", nil
}
