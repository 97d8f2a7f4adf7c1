package progress

import (
	"context"
	"sync"
	"time"
)

// Ticking drives a Printer from two goroutines: the event stream's callback (Event) and a
// ticker (Start) that calls Tick, so the status line's elapsed times move while nothing
// happens. A mutex serializes the two. The zero value is not usable; call NewTicking.
type Ticking struct {
	mu sync.Mutex // guards p and err
	p  *Printer
	// err is the first write error of a tick, returned by the next Event.
	err error
}

// NewTicking wraps p.
func NewTicking(p *Printer) *Ticking { return &Ticking{p: p} }

// Event is Printer.Event under the lock (a client.EventFunc). It also returns the first
// write error a tick met.
func (t *Ticking) Event(id int64, kind string, data []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	return t.p.Event(id, kind, data)
}

// Do runs fn with the printer under the lock (for Summary and final lines).
func (t *Ticking) Do(fn func(p *Printer) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fn(t.p)
}

// Start ticks the printer every interval with now() until ctx ends or the returned stop is
// called; stop blocks until the ticker goroutine has exited. It is safe to call stop more than
// once.
func (t *Ticking) Start(ctx context.Context, interval time.Duration, now func() time.Time) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				t.mu.Lock()
				if err := t.p.Tick(now()); err != nil && t.err == nil {
					t.err = err
				}
				t.mu.Unlock()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
