package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/messages"
)

// terminalGrace is how long a stream keeps reading the ledger of a run whose status is already
// final without a terminal entry after the resume point (a Last-Event-ID past the end).
const terminalGrace = 2 * time.Second

// sseRetry is the reconnection delay an event stream asks EventSource clients to wait
// (its `retry:` field, in milliseconds) before reconnecting with Last-Event-ID.
const sseRetry = 1000

// isTerminalKind reports whether a ledger kind ends a run's event stream.
func isTerminalKind(kind string) bool {
	return kind == messages.KindRunSucceeded || kind == messages.KindRunFailed || kind == messages.KindRunCancelled
}

// lastEventID returns the resume point of an event stream: the Last-Event-ID header, else the
// last_event_id query parameter, else 0.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("api: last event id %q is not a non-negative integer", v)
	}
	return n, nil
}

// runEvents handles GET /v1/runs/{id}/events.
func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	after, err := lastEventID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.authorizedRun(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.stream(w, r, run.SharedRunId, after)
}

// stream writes the run's ledger entries with Seq > after as Server-Sent Events until the
// terminal entry or until the client goes away. runID must be a shared run id (the ledger is
// read straight from the store, without resolving execution ids). It blocks for the stream's
// lifetime.
func (s *server) stream(w http.ResponseWriter, r *http.Request, runID string, after int64) {
	ctx := r.Context()
	changed, cancel := s.node.Hub().Subscribe(runID)
	defer cancel()
	flush, ok := s.openStream(w)
	if !ok {
		return
	}
	poll := time.NewTicker(s.cfg.SSEPoll)
	defer poll.Stop()
	heartbeat := time.NewTicker(s.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	var finalSince time.Time
	for {
		entries, err := s.node.Store().ReadLedger(ctx, runID, after, 0)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("api: read ledger for stream", zap.String("shared_run_id", runID), zap.Error(err))
			}
			return
		}
		for _, e := range entries {
			if err := writeEvent(w, e); err != nil {
				return
			}
			after = e.Seq
			if isTerminalKind(e.Kind) {
				flush()
				return
			}
		}
		if len(entries) > 0 {
			finalSince = time.Time{}
			if !flush() {
				return
			}
		} else if s.runFinal(r, runID) {
			if finalSince.IsZero() {
				finalSince = time.Now()
			} else if time.Since(finalSince) >= terminalGrace {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-poll.C:
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || !flush() {
				return
			}
		}
	}
}

// openStream starts an SSE answer on w (headers, the retry field) and returns its flush
// function; ok is false when the client is gone already.
func (s *server) openStream(w http.ResponseWriter) (flush func() bool, ok bool) {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.log.Debug("api: clear write deadline", zap.Error(err))
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetry); err != nil {
		return nil, false
	}
	flush = func() bool {
		if err := rc.Flush(); err != nil {
			s.log.Debug("api: flush event stream", zap.Error(err))
			return false
		}
		return true
	}
	return flush, flush()
}

// runFinal reports whether the run's status is final.
func (s *server) runFinal(r *http.Request, runID string) bool {
	run, err := s.node.GetRun(r.Context(), runID)
	return err == nil && messages.IsTerminalRun(run.Status)
}

// writeEvent writes one ledger entry as an SSE event.
func writeEvent(w http.ResponseWriter, e *messages.LedgerEntry) error {
	b, err := json.Marshal(ledgerEntryFromMessage(e))
	if err != nil {
		return fmt.Errorf("api: encode event: %w", err)
	}
	if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, b); err != nil {
		return fmt.Errorf("api: write event: %w", err)
	}
	return nil
}
