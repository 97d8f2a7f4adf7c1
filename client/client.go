package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dairuntime/dair/httpapi"
)

// Sentinel errors of package client.
var (
	// ErrBadResponse is wrapped by the error a method returns when a 2xx answer cannot be
	// decoded into the expected view.
	ErrBadResponse = errors.New("client: bad response")
	// ErrStreamEnded is returned by Follow when the event stream keeps ending before the run is
	// final (the server answers but never delivers the terminal event).
	ErrStreamEnded = errors.New("client: event stream ended before the run finished")
)

// Error is a non-2xx answer of the API. Code and Message come from the server's
// {error: {code, message}} body; when the body is not of that shape Code is empty and Message
// holds the start of the body or the status text.
type Error struct {
	Status  int
	Code    string
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// Client talks to one dair node. The zero value is not usable; call New.
type Client struct {
	base  string
	token string
	// HTTP performs the requests. New sets a client without an overall timeout (streams are
	// long-lived); per-call deadlines come from ctx.
	HTTP *http.Client
}

// New returns a client of the API at base (e.g. "http://127.0.0.1:8080"); token, when not
// empty, is sent as a bearer token.
func New(base, token string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, HTTP: &http.Client{}}
}

// BaseURL returns the server address the client talks to.
func (c *Client) BaseURL() string { return c.base }

// newRequest builds a request to path (already escaped) with an optional body.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("client: build request %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a request and decodes a 2xx JSON answer into out (nil to discard it).
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) (err error) {
	req, err := c.newRequest(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer func() {
		if cerr := closeBody(resp.Body); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrBadResponse, method, path, err)
	}
	return nil
}

// doJSON sends in as a JSON body.
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("client: encode request: %w", err)
	}
	return c.do(ctx, method, path, bytes.NewReader(b), "application/json", out)
}

// closeBody drains a little of the body so the connection can be reused, then closes it.
// It returns the close error; a drain error only costs the connection and is not reported.
func closeBody(b io.ReadCloser) error {
	if _, err := io.CopyN(io.Discard, b, 4096); err != nil && !errors.Is(err, io.EOF) {
		return errors.Join(fmt.Errorf("client: drain body: %w", err), b.Close())
	}
	return b.Close()
}

// decodeError builds an *Error from a non-2xx answer.
func decodeError(resp *http.Response) error {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return &Error{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	}
	var eb httpapi.ErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
		return &Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200]
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &Error{Status: resp.StatusCode, Message: msg}
}

// esc escapes one path segment. "." and ".." are escaped too (%2E): as they are, the client's
// URL resolution or the server's path cleaning would drop them with the segment before.
func esc(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// query builds "?k=v&..." from non-empty pairs.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Ready asks GET /readyz and returns nil when the node answers 200.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, "", nil)
}

// Healthz asks GET /healthz and returns nil when the node answers 200.
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, "", nil)
}

// WaitReady polls /readyz every interval until it answers 200 or ctx ends.
func (c *Client) WaitReady(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := c.Ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: wait ready: %w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
