package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/dairuntime/dair/internal/dag"
	"io"
	"net/http"
	"strings"

	"github.com/dairuntime/dair/internal/step"
)

// HTTP returns the http handler. `with` holds:
//
//   - method: default GET.
//   - url: required, absolute http or https.
//   - headers: map of header name to value (non-strings are formatted with %v).
//   - body: a string is sent as is; any other value is sent as JSON with Content-Type
//     application/json unless headers set one.
//
// Every request carries `Idempotency-Key: <req.IdempotencyKey>` and the run's tenant context as
// x-tenant-id, x-org-id and x-user-id (seed 001; empty values are left out). The output is
// {"status": int, "headers": {name: first value}, "body": string, "json": parsed body}, with
// "json" present only when the response Content-Type is JSON and the body parses.
//
// A 2xx answer succeeds. 408, 429, 5xx and transport errors are retryable; other statuses,
// bad `with` values and a body over Options.MaxBodyBytes are step.Permanent. Errors name the
// method, URL and status. Run blocks until the response is read or ctx is done; the handler
// is safe for concurrent use.
func HTTP(opts Options) step.Handler {
	opts = opts.withDefaults()
	return step.Checked(step.HandlerFunc(func(ctx context.Context, req *step.Request) (step.Result, error) {
		return runHTTP(ctx, opts, req)
	}), checkHTTP)
}

// runHTTP is one attempt of the http handler.
func runHTTP(ctx context.Context, opts Options, req *step.Request) (step.Result, error) {
	method, err := optString(NameHTTP, req.With, "method")
	if err != nil {
		return step.Result{}, err
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if method == "" {
		method = http.MethodGet
	}
	rawURL, err := optString(NameHTTP, req.With, "url")
	if err != nil {
		return step.Result{}, err
	}
	u, err := checkURL(NameHTTP, rawURL)
	if err != nil {
		return step.Result{}, err
	}
	what := fmt.Sprintf("http %s %s", method, u.Redacted())

	body, jsonBody, err := encodeBody(req.With["body"])
	if err != nil {
		return step.Result{}, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return step.Result{}, invalid(NameHTTP, "build request %s: %v", what, err)
	}
	if err := setHeaders(hreq.Header, req.With["headers"]); err != nil {
		return step.Result{}, err
	}
	if jsonBody && hreq.Header.Get("Content-Type") == "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	setTenantHeaders(hreq.Header, req.Snapshot)

	resp, err := send(ctx, opts.HTTPClient, hreq, opts.MaxBodyBytes, what)
	if err != nil {
		return step.Result{}, err
	}
	if resp.status < 200 || resp.status > 299 {
		return step.Result{}, statusError(what, resp.status, snippet(resp.body))
	}
	headers := make(map[string]any, len(resp.header))
	for k, vs := range resp.header {
		if len(vs) > 0 {
			headers[k] = vs[0]
		}
	}
	out := map[string]any{
		"status":  resp.status,
		"headers": headers,
		"body":    string(resp.body),
	}
	if isJSON(resp.header.Get("Content-Type")) && len(resp.body) > 0 {
		var v any
		if err := json.Unmarshal(resp.body, &v); err == nil {
			out["json"] = v
		}
	}
	return step.Result{Output: out}, nil
}

// encodeBody turns `with.body` into request bytes; isJSON reports a JSON-encoded value.
func encodeBody(v any) (body []byte, isJSON bool, err error) {
	switch b := v.(type) {
	case nil:
		return nil, false, nil
	case string:
		return []byte(b), false, nil
	case []byte:
		return b, false, nil
	}
	body, err = json.Marshal(v)
	if err != nil {
		return nil, false, invalid(NameHTTP, "encode body as json: %v", err)
	}
	return body, true, nil
}

// setHeaders copies `with.headers` into h.
func setHeaders(h http.Header, v any) error {
	switch m := v.(type) {
	case nil:
		return nil
	case map[string]string:
		for k, val := range m {
			if err := setHeader(h, k, val); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for k, val := range m {
			if val == nil {
				continue
			}
			s, ok := val.(string)
			if !ok {
				s = fmt.Sprint(val)
			}
			if err := setHeader(h, k, s); err != nil {
				return err
			}
		}
		return nil
	}
	return invalid(NameHTTP, "headers must be a mapping, got %s", dag.KindOf(v))
}

// setHeader validates one header and sets it, so a bad header is a permanent input error
// rather than a retryable transport error.
func setHeader(h http.Header, k, v string) error {
	if !isToken(k) {
		return invalid(NameHTTP, "invalid header name %q", k)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return invalid(NameHTTP, "invalid value for header %q", k)
	}
	h.Set(k, v)
	return nil
}
