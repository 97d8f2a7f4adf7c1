// Package workgroup tracks the background goroutines and timers of one owner (a dair node) under
// a single stop context, so that the owner's Stop can cancel them all and wait for them, like
// memberlist's Shutdown or temporal's baseWorker.Stop.
//
// # Usage
//
//	g := workgroup.New()
//	g.Go(func(ctx context.Context) { ... return when ctx is done ... })
//	stop := g.Tick(time.Second, func() { ... })
//	g.After(200*time.Millisecond, func() { ... })
//	...
//	err := g.Stop(ctx) // no new work; cancel; wait for every goroutine until ctx ends
//
// Every method is goroutine-safe. After Stop has begun, Go, After and Tick start nothing and
// report so (false, or a no-op stop function).
package workgroup

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Group is a set of tracked goroutines and timers sharing one stop context. The zero value is
// not usable; call New.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards closed, running, timers, nextID
	closed  bool
	running int
	timers  map[uint64]*time.Timer
	nextID  uint64
	idle    *sync.Cond // signalled when running drops to 0 (uses mu)
	stopped chan struct{}
}

// New returns an empty, running group.
func New() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Group{ctx: ctx, cancel: cancel, timers: make(map[uint64]*time.Timer), stopped: make(chan struct{})}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// Context returns the group's stop context: it is cancelled when Stop begins. Work that is
// not started through Go (a callback, a request handled on the caller's goroutine) can derive
// its own context from it.
func (g *Group) Context() context.Context { return g.ctx }

// Stopping returns a channel closed when Stop begins.
func (g *Group) Stopping() <-chan struct{} { return g.ctx.Done() }

// Go runs fn on a new goroutine with the group's stop context and reports true; once Stop has
// begun it runs nothing and reports false. fn must return soon after ctx is done.
func (g *Group) Go(fn func(ctx context.Context)) bool {
	if !g.enter() {
		return false
	}
	go func() {
		defer g.exit()
		fn(g.ctx)
	}()
	return true
}

// GoTimeout is Go with a context that also ends after d.
func (g *Group) GoTimeout(d time.Duration, fn func(ctx context.Context)) bool {
	return g.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		fn(ctx)
	})
}

// After calls fn on its own goroutine after d, unless Stop begins first (then fn is never
// called). It reports false, and schedules nothing, once Stop has begun.
func (g *Group) After(d time.Duration, fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.nextID++
	id := g.nextID
	g.running++
	g.timers[id] = time.AfterFunc(d, func() {
		g.mu.Lock()
		_, live := g.timers[id]
		delete(g.timers, id)
		stopping := g.closed
		g.mu.Unlock()
		if !live {
			return // Stop took this timer over (and accounted for it)
		}
		if !stopping {
			fn()
		}
		g.exit()
	})
	return true
}

// Tick calls fn every d from one goroutine of the group until the returned function is called
// or Stop begins. The returned function is idempotent and does not wait for a running fn.
func (g *Group) Tick(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(done) }) }
	g.Go(func(ctx context.Context) {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fn()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return stop
}

// Stop begins the shutdown (nothing new starts; the stop context is cancelled; pending timers
// are dropped) and waits until every goroutine of the group has returned or ctx ends. It is
// idempotent; later calls wait the same way. It returns an error naming how many goroutines
// were still running when ctx ended.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		for id, t := range g.timers {
			// A timer that already fired is left in the map: its callback, waiting for mu,
			// finds itself live, sees closed, skips fn and accounts for itself.
			if t.Stop() {
				g.running--
				delete(g.timers, id)
			}
		}
		go g.waitIdle()
	}
	g.mu.Unlock()
	g.cancel()
	select {
	case <-g.stopped:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		n := g.running
		g.mu.Unlock()
		return fmt.Errorf("workgroup: %d goroutines still running: %w", n, ctx.Err())
	}
}

// Running returns how many goroutines and pending timers the group tracks now.
func (g *Group) Running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

func (g *Group) waitIdle() {
	g.mu.Lock()
	for g.running > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
	close(g.stopped)
}

func (g *Group) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.running++
	return true
}

func (g *Group) exit() {
	g.mu.Lock()
	g.running--
	if g.running == 0 {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// Each calls fn for every item, at most limit at a time, and returns when all returned. A
// single item (or a limit below 2) is handled on the caller's goroutine.
func Each[T any](items []T, limit int, fn func(T)) {
	if len(items) == 1 || limit < 2 {
		for _, it := range items {
			fn(it)
		}
		return
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(it)
		}()
	}
	wg.Wait()
}
