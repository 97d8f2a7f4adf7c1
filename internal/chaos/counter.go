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

// Call is one handler call the counting server received: when it arrived and the pid of the
// node process that sent it (0 when unknown).
type Call struct {
	At  time.Time
	PID int
}

// counter is the workload's HTTP endpoint: the pipelines' http steps call it, and it records
// every call under its Idempotency-Key ("<execution_id>/<step_id>"), with its arrival time and
// sender, so the harness can tell whether a committed step's handler ran again. A request
// waits ?ms=N milliseconds before its 200 answer (the step takes time). It is safe for
// concurrent use.
type counter struct {
	srv   *http.Server
	url   string
	local *net.TCPAddr
	pids  func() []int // the node processes that may call
	done  chan error

	mu     sync.Mutex        // guards calls and owners
	calls  map[string][]Call // by Idempotency-Key
	owners map[string]int    // sender pid by connection (its remote address)
}

// startCounter serves the counter on a kernel-chosen 127.0.0.1 port from one goroutine. pids
// lists the processes a connection may come from, to name each call's sender.
func startCounter(pids func() []int) (*counter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: counting server: %w", err)
	}
	c := &counter{url: "http://" + ln.Addr().String(), local: ln.Addr().(*net.TCPAddr), pids: pids,
		done: make(chan error, 1), calls: map[string][]Call{}, owners: map[string]int{}}
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, ConnState: c.connState}
	go func() {
		err := c.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		c.done <- err
	}()
	return c, nil
}

// connState names the sender of each new connection (before its first request is read) and
// forgets it when the connection closes.
func (c *counter) connState(conn net.Conn, st http.ConnState) {
	key := conn.RemoteAddr().String()
	switch st {
	case http.StateNew:
		peer, ok := conn.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return
		}
		pid := socketOwner(peer, c.local, c.pids())
		c.mu.Lock()
		c.owners[key] = pid
		c.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		c.mu.Lock()
		delete(c.owners, key)
		c.mu.Unlock()
	}
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		c.mu.Lock()
		c.calls[key] = append(c.calls[key], Call{At: now, PID: c.owners[r.RemoteAddr]})
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
func (c *counter) snapshot() map[string][]Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]Call, len(c.calls))
	for k, v := range c.calls {
		out[k] = append([]Call(nil), v...)
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
