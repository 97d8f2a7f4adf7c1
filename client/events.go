package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// maxEventLine bounds one SSE line (a step output can be large).
const maxEventLine = 4 << 20

// Follow reconnect policy: consecutive reconnects without a new event before giving up, and
// the backoff between them.
const (
	followMaxRetries  = 20
	followBackoff     = 250 * time.Millisecond
	followMaxBackoff  = 2 * time.Second
	eventsContentType = "text/event-stream"
)

// EventFunc receives one server-sent event: its numeric id (0 when absent or not numeric),
// its kind (the `event:` field) and its data (the `data:` lines joined by newlines; the slice
// is owned by the callee). Returning an error stops the stream with that error.
type EventFunc func(id int64, kind string, data []byte) error

// callbackError marks an error returned by the caller's EventFunc.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// Events streams GET /v1/runs/{id}/events, calling fn for each event in order. When
// lastEventID is not empty it is sent as Last-Event-ID so the server resumes after it.
//
// It blocks until the server ends the stream (nil: the server sends the run's terminal event
// last), the connection drops or ctx ends (the transport error), fn returns an error (that
// error, unwrapped) or the server refuses the stream (*Error).
func (c *Client) Events(ctx context.Context, runID, lastEventID string, fn EventFunc) error {
	err := c.events(ctx, runID, lastEventID, fn)
	var cb *callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	return err
}

func (c *Client) events(ctx context.Context, runID, lastEventID string, fn EventFunc) (err error) {
	path := "/v1/runs/" + esc(runID) + "/events"
	req, err := c.newRequest(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	req.Header.Set("Accept", eventsContentType)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("client: GET %s: %w", path, err)
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("client: close event stream: %w", cerr)
		}
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var (
		id   int64
		kind string
		data []string
		have bool
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if have {
				if err := fn(id, kind, []byte(strings.Join(data, "\n"))); err != nil {
					return &callbackError{err: err}
				}
			}
			id, kind, data, have = 0, "", nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // comment (heartbeat)
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			n, perr := strconv.ParseInt(value, 10, 64)
			if perr == nil {
				id = n
			}
			have = true
		case "event":
			kind, have = value, true
		case "data":
			data, have = append(data, value), true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("client: read event stream: %w", err)
	}
	return nil
}

// Follow streams a run's events until the run is final and returns the final run. When the
// stream ends early or the connection drops (a node restart, a proxy timeout), it checks the
// run and reconnects with Last-Event-ID set to the last event seen, so no event is delivered
// twice or lost.
//
// It blocks until the run is final, ctx ends, fn returns an error (returned as is), the
// server refuses the stream or the run (*Error, e.g. 404), or followMaxRetries reconnects
// in a row bring no event (ErrStreamEnded, or the last transport error).
func (c *Client) Follow(ctx context.Context, runID string, fn EventFunc) (*httpapi.Run, error) {
	var (
		last    int64
		retries int
		backoff = followBackoff
	)
	for {
		progressed := false
		lastID := ""
		if last > 0 {
			lastID = strconv.FormatInt(last, 10)
		}
		err := c.events(ctx, runID, lastID, func(id int64, kind string, data []byte) error {
			if id > 0 {
				if id <= last {
					return nil
				}
				last = id
			}
			progressed = true
			return fn(id, kind, data)
		})
		var cb *callbackError
		if errors.As(err, &cb) {
			return nil, cb.err
		}
		var ce *Error
		if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		run, gerr := c.GetRun(ctx, runID)
		if gerr == nil && messages.IsTerminalRun(run.Status) {
			return run, nil
		}
		if errors.As(gerr, &ce) && ce.Status >= 400 && ce.Status < 500 {
			return nil, gerr
		}
		if progressed {
			retries, backoff = 0, followBackoff
		}
		retries++
		if retries > followMaxRetries {
			if err == nil {
				err = gerr
			}
			if err == nil {
				err = ErrStreamEnded
			}
			return nil, fmt.Errorf("client: follow run %s: %w", runID, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, followMaxBackoff)
	}
}
