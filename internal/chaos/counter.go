package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxStepDelay caps the delay a request may ask the counting server for.
const maxStepDelay = 10 * time.Second

// counter is the workload's HTTP endpoint: the pipelines' http steps call it, and it records
// the arrival time of every call under its Idempotency-Key ("<execution_id>/<step_id>"), so the
// harness can tell whether a committed step's handler ran again. A request waits ?ms=N
// milliseconds before its 200 answer (the step takes time). It is safe for concurrent use.
type counter struct {
	srv  *http.Server
	url  string
	done chan error

	mu    sync.Mutex             // guards calls
	calls map[string][]time.Time // arrival times by Idempotency-Key
}

// startCounter serves the counter on a kernel-chosen 127.0.0.1 port from one goroutine.
func startCounter() (*counter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: counting server: %w", err)
	}
	c := &counter{url: "http://" + ln.Addr().String(), done: make(chan error, 1), calls: map[string][]time.Time{}}
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		err := c.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		c.done <- err
	}()
	return c, nil
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		c.mu.Lock()
		c.calls[key] = append(c.calls[key], now)
		c.mu.Unlock()
	}
	ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
	if err != nil || ms < 0 {
		ms = 0
	}
	t := time.NewTimer(min(time.Duration(ms)*time.Millisecond, maxStepDelay))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := fmt.Fprintf(w, `{"ok":true,"slept_ms":%d}`, ms); err != nil {
		return // the caller went away; its attempt fails and is retried
	}
}

// snapshot returns a copy of the calls so far. The caller owns the returned map.
func (c *counter) snapshot() map[string][]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]time.Time, len(c.calls))
	for k, v := range c.calls {
		out[k] = append([]time.Time(nil), v...)
	}
	return out
}

// close shuts the server down, waiting up to two seconds for open requests.
func (c *counter) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := c.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, c.srv.Close())
	}
	return errors.Join(err, <-c.done)
}
