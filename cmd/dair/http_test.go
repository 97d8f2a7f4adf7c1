package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// rawCall sends one request with net/http only (no dair client) and returns the status and
// body.
func rawCall(t *testing.T, method, url, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { require.NoError(t, resp.Body.Close()) }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// rawJSON sends a request, requires status want and decodes the answer into out (if non-nil).
func rawJSON(t *testing.T, method, url, body string, want int, out any) {
	t.Helper()
	code, b := rawCall(t, method, url, body)
	require.Equal(t, want, code, "%s %s: %s", method, url, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s", b)
	}
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id   int64
	kind string
	data httpapi.LedgerEntry
}

// sseStream is an open event stream read with net/http and bufio only.
type sseStream struct {
	resp *http.Response
	br   *bufio.Reader
}

func openSSE(t *testing.T, url string, lastEventID int64) *sseStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		b, rerr := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		t.Fatalf("GET %s = %d %s (%v)", url, resp.StatusCode, b, rerr)
	}
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	return &sseStream{resp: resp, br: bufio.NewReader(resp.Body)}
}

// next returns the next event (comments skipped); ok is false at the end of the stream.
func (s *sseStream) next(t *testing.T) (ev sseEvent, ok bool) {
	t.Helper()
	have := false
	for {
		line, err := s.br.ReadString('\n')
		if err == io.EOF && !have && line == "" {
			return ev, false
		}
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if have {
				return ev, true
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry: "):
		case strings.HasPrefix(line, "id: "):
			ev.id, err = strconv.ParseInt(line[len("id: "):], 10, 64)
			require.NoError(t, err, line)
			have = true
		case strings.HasPrefix(line, "event: "):
			ev.kind, have = line[len("event: "):], true
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(line[len("data: "):]), &ev.data), line)
			have = true
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
}

func (s *sseStream) close(t *testing.T) { require.NoError(t, s.resp.Body.Close()) }

// TestDair_Dev_rawHTTP drives a `dair dev` process with net/http alone, as a program that
// does not use the dair client would.
func TestDair_Dev_rawHTTP(t *testing.T) {
	n := startDev(t, t.TempDir(), pipelinesDir(t))
	u := n.url

	rawJSON(t, "GET", u+"/healthz", "", http.StatusOK, nil)
	rawJSON(t, "PUT", u+"/v1/pipelines/echo3", "key: echo3\nsteps:\n  - id: a\n    uses: echo\n    with: {value: \"{{ .input.n }}\"}\n",
		http.StatusOK, nil)
	var sub httpapi.SubmitResponse
	rawJSON(t, "POST", u+"/v1/runs", `{"pipeline":"echo3","tenant_id":"raw","input":{"n":7},"idempotency_key":"once"}`,
		http.StatusAccepted, &sub)
	require.NotEmpty(t, sub.SharedRunID)
	var again httpapi.SubmitResponse
	rawJSON(t, "POST", u+"/v1/runs", `{"pipeline":"echo3","tenant_id":"raw","input":{"n":7},"idempotency_key":"once"}`,
		http.StatusAccepted, &again)
	require.Equal(t, sub.SharedRunID, again.SharedRunID, "same idempotency key, same run")

	var run httpapi.Run
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		rawJSON(t, "GET", u+"/v1/runs/"+sub.SharedRunID, "", http.StatusOK, &run)
		return messages.IsTerminalRun(run.Status)
	}, "run finished")
	require.Equal(t, messages.RunSucceeded, run.Status, run.FailureReason)
	require.Equal(t, "raw", run.TenantID)

	var list struct {
		Runs []map[string]any `json:"runs"`
	}
	rawJSON(t, "GET", u+"/v1/runs?tenant_id=raw", "", http.StatusOK, &list)
	require.Len(t, list.Runs, 1)

	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown field", "POST", "/v1/runs", `{"pipeline":"echo3","nope":1}`, 400, httpapi.CodeBadRequest},
		{"malformed", "POST", "/v1/runs", `{"pipeline"`, 400, httpapi.CodeBadRequest},
		{"unknown run", "GET", "/v1/runs/run-nope", "", 404, httpapi.CodeNotFound},
		{"unknown pipeline", "POST", "/v1/runs", `{"pipeline":"nope"}`, 404, httpapi.CodeUnknownPipeline},
		{"oversize", "POST", "/v1/runs", `{"pipeline":"echo3","input":"` + strings.Repeat("x", 2<<20) + `"}`, 413, httpapi.CodeRequestTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := rawCall(t, tt.method, u+tt.path, tt.body)
			require.Equal(t, tt.status, code, "%s", b)
			var eb httpapi.ErrorBody
			require.NoError(t, json.Unmarshal(b, &eb), "%s", b)
			require.Equal(t, tt.code, eb.Error.Code)
		})
	}

	s := openSSE(t, u+"/v1/runs/"+sub.SharedRunID+"/events", 0)
	var last sseEvent
	for ev, ok := s.next(t); ok; ev, ok = s.next(t) {
		last = ev
	}
	s.close(t)
	require.Equal(t, messages.KindRunSucceeded, last.kind)

	_, metrics := rawCall(t, "GET", u+"/metrics", "")
	require.Contains(t, string(metrics), `dair_runs_total{status="succeeded"}`)
	require.Equal(t, 0, n.stop(t), "logs:\n%s", n.logs.String())
}

// slowChain is a pipeline of n chained sleep steps of d each.
func slowChain(key string, n int, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key: %s\nsteps:\n", key)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: s%02d\n    uses: sleep\n    with: {duration: %s}\n", i, d)
		if i > 1 {
			fmt.Fprintf(&b, "    needs: [s%02d]\n", i-1)
		}
	}
	return b.String()
}

// TestDair_Events_resumeAcrossRestart: a client reads 3 events of a slow run from a `dair dev`
// process, the node is stopped with SIGTERM and started again on the same data dir, and the
// client reconnects with Last-Event-ID: it receives the rest through the terminal event with
// contiguous ids (no gap, no duplicate), and the run succeeds.
func TestDair_Events_resumeAcrossRestart(t *testing.T) {
	data, pipes := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(pipes, "slow10.yaml"), []byte(slowChain("slow10", 10, 200*time.Millisecond)), 0o600))
	n := startDev(t, data, pipes)

	var sub httpapi.SubmitResponse
	rawJSON(t, "POST", n.url+"/v1/runs", `{"pipeline":"slow10","tenant_id":"acme"}`, http.StatusAccepted, &sub)
	s := openSSE(t, n.url+"/v1/runs/"+sub.SharedRunID+"/events", 0)
	var got []sseEvent
	for len(got) < 3 {
		ev, ok := s.next(t)
		require.True(t, ok, "stream ended after %d events", len(got))
		got = append(got, ev)
	}
	s.close(t)

	require.Equal(t, 0, n.stop(t), "SIGTERM exits 0; logs:\n%s", n.logs.String())
	var mid httpapi.Run
	n2 := startDev(t, data, pipes)
	rawJSON(t, "GET", n2.url+"/v1/runs/"+sub.SharedRunID, "", http.StatusOK, &mid)
	require.False(t, messages.IsTerminalRun(mid.Status), "the run finished before the restart; the test proves nothing")

	s = openSSE(t, n2.url+"/v1/runs/"+sub.SharedRunID+"/events", got[len(got)-1].id)
	for ev, ok := s.next(t); ok; ev, ok = s.next(t) {
		got = append(got, ev)
	}
	s.close(t)

	for i, ev := range got {
		require.Equal(t, int64(i+1), ev.id, "event %d (%s): gap or duplicate in %v", i, ev.kind, eventIDs(got))
		require.Equal(t, ev.id, ev.data.Seq)
		require.Equal(t, ev.kind, ev.data.Kind)
	}
	require.Equal(t, messages.KindRunSucceeded, got[len(got)-1].kind)

	var led httpapi.Ledger
	rawJSON(t, "GET", n2.url+"/v1/executions/"+sub.SharedRunID+"/ledger", "", http.StatusOK, &led)
	require.Len(t, got, len(led.Entries), "the streams together gave the whole ledger")
	var run httpapi.Run
	rawJSON(t, "GET", n2.url+"/v1/runs/"+sub.SharedRunID, "", http.StatusOK, &run)
	require.Equal(t, messages.RunSucceeded, run.Status, run.FailureReason)
	require.Equal(t, 0, n2.stop(t))
}

func eventIDs(evs []sseEvent) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.id
	}
	return out
}
