package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/messages"
)

// terminalGrace is how long a stream keeps reading the ledger of a run whose status is already
// final without a terminal entry after the resume point (a Last-Event-ID past the end).
const terminalGrace = 2 * time.Second

// sseRetry is the reconnection delay an event stream asks EventSource clients to wait
// (its `retry:` field, in milliseconds) before reconnecting with Last-Event-ID.
const sseRetry = 1000

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

// eventBufs holds the buffers streams encode their events in (*[]byte): a stream writes a few
// KiB over its life, in batches the server copies (a buffer is reused once written).
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledEventBuf is the largest buffer a stream hands back to eventBufs.
const maxPooledEventBuf = 64 << 10

func putEventBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledEventBuf {
		eventBufs.Put(bp)
	}
}

// stream writes the run's ledger entries with Seq > after as Server-Sent Events until the
// terminal entry or until the client goes away. runID must be a shared run id (the ledger is
// read straight from the store, without resolving execution ids). After its first read, it
// writes the entries this node appended as the hub hands them over, and reads the store only
// when they do not follow on from what it wrote (a write of another node, or a missed change)
// and at each poll. It blocks for the stream's lifetime.
func (s *server) stream(w http.ResponseWriter, r *http.Request, runID string, after int64) {
	ctx := r.Context()
	tail, cancel := s.node.Hub().SubscribeTail(runID)
	defer cancel()
	flush, ok := s.openStream(w, r)
	if !ok {
		return
	}
	timer := newStreamTimer(s.cfg.SSEPoll, s.cfg.SSEHeartbeat)
	defer timer.stop()
	var finalSince time.Time
	bp := eventBufs.Get().(*[]byte)
	defer putEventBuf(bp)
	read, first, storeDown := true, true, false
	for {
		var (
			entries []*messages.LedgerEntry
			err     error
		)
		entries, read, err = s.nextEntries(ctx, tail, runID, after, read)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// The store is unreachable: the stream stays open and reads again at the next
			// poll (a stream that ended here, cleanly, read as a run that had finished).
			if !storeDown {
				s.log.Warn("api: read ledger for stream", zap.String("shared_run_id", runID), zap.Error(err))
				if _, werr := fmt.Fprint(w, ": store unavailable, retrying\n\n"); werr != nil || !flush() {
					return
				}
				storeDown, first = true, false
			}
		default:
			storeDown = false
		}
		terminal := false
		buf := (*bp)[:0]
		for _, e := range entries {
			buf = appendEvent(buf, e)
			after = e.Seq
			if terminal = ledger.IsTerminalKind(e.Kind); terminal {
				break
			}
		}
		*bp = buf // grown, for the next pass and the pool
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
		if terminal {
			// The server sends what is buffered with the end of the answer (on HTTP/2 in the
			// DATA frame that ends the stream, on HTTP/1.1 in the write of the last chunk): a
			// flush here would cost a frame and a write more. A stream that ends on its first
			// pass flushes, so that its headers stay those of a stream (no Content-Length).
			if first {
				flush()
			}
			return
		}
		// What was written goes out before the stream waits, in one flush (the first one with
		// the headers): one write per batch of entries, not per entry.
		if (first || len(buf) > 0) && !flush() {
			return
		}
		first = false
		switch {
		case len(entries) > 0:
			finalSince = time.Time{}
		case !read:
		case !s.runFinal(r, runID):
		case finalSince.IsZero():
			finalSince = time.Now()
		case time.Since(finalSince) >= terminalGrace:
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tail.C:
			read = false
		case <-timer.C():
			poll, beat := timer.due()
			read = poll
			if beat {
				if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || !flush() {
					return
				}
			}
		}
	}
}

// streamTimer is one timer for a stream's two periodic duties: reading the store every poll
// and a heartbeat comment every beat. A stream waits on it, its context and its tail: a
// select's cost grows with its channels, and a stream selects once per batch of events.
// It is not goroutine-safe (its stream's own).
type streamTimer struct {
	t                  *time.Timer
	poll, beat         time.Duration
	nextPoll, nextBeat time.Time
}

func newStreamTimer(poll, beat time.Duration) *streamTimer {
	now := time.Now()
	return &streamTimer{t: time.NewTimer(min(poll, beat)), poll: poll, beat: beat, nextPoll: now.Add(poll), nextBeat: now.Add(beat)}
}

// C receives when a duty may be due; due then says which.
func (st *streamTimer) C() <-chan time.Time { return st.t.C }

// due reports which duties are due, each then due again a period later, and sets the timer
// for the next one.
func (st *streamTimer) due() (poll, beat bool) {
	now := time.Now()
	if !now.Before(st.nextPoll) {
		poll, st.nextPoll = true, now.Add(st.poll)
	}
	if !now.Before(st.nextBeat) {
		beat, st.nextBeat = true, now.Add(st.beat)
	}
	next := st.nextPoll
	if st.nextBeat.Before(next) {
		next = st.nextBeat
	}
	st.t.Reset(next.Sub(now))
	return poll, beat
}

func (st *streamTimer) stop() { st.t.Stop() }

// nextEntries returns the entries after `after` a stream writes next: those tail handed over,
// unless asked to read (read) or they do not follow on from after, in which case it reads the
// store (fromStore). ok is false when the store read failed (logged unless ctx ended).
func (s *server) nextEntries(ctx context.Context, tail *actors.Tail, runID string, after int64, read bool) (entries []*messages.LedgerEntry, fromStore bool, err error) {
	if !read {
		got, complete := tail.Take()
		if next, follows := following(got, after); complete && follows {
			return next, false, nil
		}
	}
	entries, err = s.node.Store().ReadLedger(ctx, runID, after, 0)
	return entries, true, err
}

// following returns the entries of got with Seq > after, in Seq order, and whether they are
// exactly the ones that follow after (after+1, after+2, ...): not ok means a gap only the store
// can fill. An entry without a Seq is a gap.
func following(got []*messages.LedgerEntry, after int64) (next []*messages.LedgerEntry, ok bool) {
	if inOrderAfter(got, after) { // the common case: the hub handed over just what follows
		return got, true
	}
	for _, e := range got {
		if e.GetSeq() > after || e.GetSeq() == 0 {
			next = append(next, e)
		}
	}
	slices.SortFunc(next, func(a, b *messages.LedgerEntry) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	for i, e := range next {
		if e.GetSeq() != after+int64(i)+1 {
			return nil, false
		}
	}
	return next, true
}

// inOrderAfter reports whether got is exactly the entries after+1, after+2, ... in order.
func inOrderAfter(got []*messages.LedgerEntry, after int64) bool {
	for i, e := range got {
		if e.GetSeq() != after+int64(i)+1 {
			return false
		}
	}
	return true
}

// openStream starts an SSE answer to r on w (headers, the retry field) and returns its flush
// function; ok is false when the client is gone already. Nothing is flushed yet: the stream
// sends the headers with its first entries, or when it first waits. A stream outlives the
// server's WriteTimeout: openStream clears the answer's write deadline unless the server has
// none (as dair's own: clearing costs a round trip to the connection's goroutine on HTTP/2).
func (s *server) openStream(w http.ResponseWriter, r *http.Request) (flush func() bool, ok bool) {
	rc := http.NewResponseController(w)
	if hs, known := r.Context().Value(http.ServerContextKey).(*http.Server); !known || hs.WriteTimeout > 0 {
		if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
			s.log.Debug("api: clear write deadline", zap.Error(err))
		}
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
	return flush, true
}

// runFinal reports whether the run's status is final.
func (s *server) runFinal(r *http.Request, runID string) bool {
	run, err := s.node.GetRun(r.Context(), runID)
	return err == nil && messages.IsTerminalRun(run.Status)
}

// writeEvent writes one ledger entry as an SSE event.
func writeEvent(w http.ResponseWriter, e *messages.LedgerEntry) error {
	if _, err := w.Write(appendEvent(nil, e)); err != nil {
		return fmt.Errorf("api: write event: %w", err)
	}
	return nil
}
