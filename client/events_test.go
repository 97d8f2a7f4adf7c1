package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

type event struct {
	id   int64
	kind string
	data string
}

func TestClient_Events_parse(t *testing.T) {
	stream := ": ping\n\n" +
		"id: 1\nevent: step_started\ndata: {\"step_id\":\"a\"}\n\n" +
		"event: note\ndata: line one\ndata: line two\n\n" +
		"id: x\ndata:no-space\n\n" +
		"id: 3\nevent: run_succeeded\ndata: {}\n\n"
	var lastID string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/runs/r1/events", r.URL.Path)
		lastID = r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, stream)
	}))
	defer srv.Close()
	var got []event
	err := New(srv.URL, "").Events(context.Background(), "r1", "7", func(id int64, kind string, data []byte) error {
		got = append(got, event{id, kind, string(data)})
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "7", lastID)
	require.Equal(t, []event{
		{1, "step_started", `{"step_id":"a"}`},
		{0, "note", "line one\nline two"},
		{0, "", "no-space"},
		{3, "run_succeeded", "{}"},
	}, got)

	stop := errors.New("stop")
	err = New(srv.URL, "").Events(context.Background(), "r1", "", func(int64, string, []byte) error { return stop })
	require.ErrorIs(t, err, stop)
}

// flakyRun serves a run's events over two connections: the first drops after two events,
// the second resumes after Last-Event-ID.
type flakyRun struct {
	mu      sync.Mutex // guards conns, lastIDs, done
	conns   int
	lastIDs []string
	done    bool
}

func (f *flakyRun) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/events") {
		f.conns++
		f.lastIDs = append(f.lastIDs, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		if f.conns == 1 {
			fmt.Fprint(w, "id: 1\nevent: step_started\ndata: {}\n\nid: 2\nevent: step_succeeded\ndata: {}\n\n")
			return // dropped before the terminal event
		}
		// A resumed stream may repeat an event; the client skips ids it has seen.
		fmt.Fprint(w, "id: 2\nevent: step_succeeded\ndata: {}\n\nid: 3\nevent: run_succeeded\ndata: {}\n\n")
		f.done = true
		return
	}
	status := messages.RunRunning
	if f.done {
		status = messages.RunSucceeded
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(httpapi.Run{SharedRunID: "r1", Status: status}); err != nil {
		return
	}
}

func TestClient_Follow_reconnectsWithLastEventID(t *testing.T) {
	f := &flakyRun{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []int64
	run, err := New(srv.URL, "").Follow(ctx, "r1", func(id int64, _ string, _ []byte) error {
		ids = append(ids, id)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, run.Status)
	require.Equal(t, []int64{1, 2, 3}, ids)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, []string{"", "2"}, f.lastIDs)
}

func TestClient_Follow_errors(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		fnErr   error
		wantErr string
	}{
		{"unknown run", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"no run"}}`)
		}, nil, "not_found"},
		{"callback error", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "id: 1\nevent: x\ndata: {}\n\n")
		}, errors.New("callback says stop"), "callback says stop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := New(srv.URL, "").Follow(ctx, "r1", func(int64, string, []byte) error { return tc.fnErr })
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
