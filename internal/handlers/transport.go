package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/dairuntime/dair/internal/step"
)

// errSnippetBytes bounds how much of an error response body goes into an error message.
const errSnippetBytes = 256

// response is a fully read HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

// checkURL parses raw and requires an absolute http or https URL with a host.
func checkURL(name, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, invalid(name, "url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalid(name, "parse url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalid(name, "url scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, invalid(name, "url %q has no host", u.Redacted())
	}
	return u, nil
}

// send performs hreq with client and reads at most limit bytes of the body. Transport errors
// and ctx expiry are returned retryable; a body over limit is a permanent ErrBodyTooLarge.
// what names the request in errors ("http GET <url>").
func send(ctx context.Context, client *http.Client, hreq *http.Request, limit int64, what string) (*response, error) {
	resp, err := client.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return nil, fmt.Errorf("handlers: %s: %w", what, err)
	}
	defer closeBody(resp.Body)
	if resp.ContentLength > limit {
		return nil, step.Permanent(fmt.Errorf("handlers: %s: status %d: content length %d over limit %d: %w",
			what, resp.StatusCode, resp.ContentLength, limit, ErrBodyTooLarge))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("handlers: %s: status %d: read body: %w", what, resp.StatusCode, err)
	}
	if int64(len(body)) > limit {
		return nil, step.Permanent(fmt.Errorf("handlers: %s: status %d: body over limit %d: %w",
			what, resp.StatusCode, limit, ErrBodyTooLarge))
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// closeBody closes a response body. The body is read to its end or abandoned on purpose
// before this runs, so a close error can only cost the pooled connection, never the attempt's
// outcome; it is deliberately not reported.
func closeBody(body io.Closer) {
	if err := body.Close(); err != nil {
		return
	}
}

// retryableStatus reports whether a non-2xx status is worth retrying: 408, 429 and 5xx.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// statusError builds the ErrStatus error for a non-2xx answer, permanent unless retryable.
func statusError(what string, code int, detail string) error {
	err := fmt.Errorf("handlers: %s: status %d: %s: %w", what, code, detail, ErrStatus)
	if retryableStatus(code) {
		return err
	}
	return step.Permanent(err)
}

// snippet returns the start of body as one line for an error message.
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > errSnippetBytes {
		s = s[:errSnippetBytes] + "..."
	}
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "empty body"
	}
	return s
}

// isJSON reports whether a Content-Type names JSON (application/json or any +json type).
func isJSON(contentType string) bool {
	if contentType == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
