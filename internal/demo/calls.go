package demo

import (
	"context"
	"fmt"
	"sync"

	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/step"
)

// callCounter counts handler calls per "<execution>/<step>" across node
// incarnations: the demo's own record of which steps ran, independent of the store. It is
// safe for concurrent use.
type callCounter struct {
	mu    sync.Mutex // guards calls
	calls map[string]int
}

// registry returns the built-in handlers, each wrapped to count its calls in c.
func (c *callCounter) registry() (*step.Registry, error) {
	base := step.NewRegistry()
	if err := handlers.Register(base, handlers.Options{}); err != nil {
		return nil, fmt.Errorf("demo: handlers: %w", err)
	}
	reg := step.NewRegistry()
	for _, name := range base.Names() {
		h, _ := base.Get(name)
		counted := step.HandlerFunc(func(ctx context.Context, r *step.Request) (step.Result, error) {
			c.mu.Lock()
			c.calls[r.ExecutionID+"/"+r.StepID]++
			c.mu.Unlock()
			return h.Run(ctx, r)
		})
		if err := reg.Register(name, counted); err != nil {
			return nil, fmt.Errorf("demo: handlers: %w", err)
		}
	}
	return reg, nil
}

// count returns the calls of step stepID of execution execID so far.
func (c *callCounter) count(execID, stepID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[execID+"/"+stepID]
}
