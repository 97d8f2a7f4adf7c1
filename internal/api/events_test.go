package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/server"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

func TestServer_Events_resumeWithLastEventID(t *testing.T) {
	tests := []struct {
		name   string
		resume func(f *fixture, path string, last int64) *sseReader
	}{
		{"header", func(f *fixture, path string, last int64) *sseReader {
			return f.openStream("GET", path, "", "Last-Event-ID", strconv.FormatInt(last, 10))
		}},
		{"query", func(f *fixture, path string, last int64) *sseReader {
			return f.openStream("GET", path+"?last_event_id="+strconv.FormatInt(last, 10), "")
		}},
	}
	f := newFixture(t, false, nil)
	f.putPipeline(slowSteps)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := f.submit(`{"pipeline":"slow","tenant_id":"acme"}`)
			path := "/v1/runs/" + sr.SharedRunID + "/events"
			first := f.openStream("GET", path, "")
			var got []sseEvent
			for len(got) < 3 {
				ev, ok := first.next()
				if !ok {
					t.Fatal("stream ended before 3 events")
				}
				got = append(got, ev)
			}
			if first.retry != "1000" {
				t.Fatalf("stream retry field = %q, want 1000 (ms before an EventSource reconnects)", first.retry)
			}
			first.close()
			rest := tt.resume(f, path, got[len(got)-1].ID).readAll()
			got = append(got, rest...)

			run := f.waitRun(sr.SharedRunID, isFinal)
			var l httpapi.Ledger
			f.call("GET", "/v1/executions/"+run.ExecutionID+"/ledger", "", http.StatusOK, &l)
			if len(got) != len(l.Entries) {
				t.Fatalf("stream gave %d events, ledger has %d", len(got), len(l.Entries))
			}
			for i, ev := range got {
				if ev.ID != l.Entries[i].Seq || ev.Kind != l.Entries[i].Kind {
					t.Fatalf("event %d = %d %s, ledger %d %s", i, ev.ID, ev.Kind, l.Entries[i].Seq, l.Entries[i].Kind)
				}
			}
			if last := got[len(got)-1]; last.Kind != "run_succeeded" {
				t.Fatalf("last event = %s", last.Kind)
			}
		})
	}
}

func TestServer_Events_heartbeatAndPastEnd(t *testing.T) {
	f := newFixture(t, false, func(c *api.Config) { c.SSEHeartbeat = 20 * time.Millisecond })
	f.putPipeline(slowSteps)
	sr := f.submit(`{"pipeline":"slow","tenant_id":"acme"}`)
	s := f.openStream("GET", "/v1/runs/"+sr.SharedRunID+"/events", "")
	pings := 0
	deadline := time.Now().Add(10 * time.Second)
	for pings == 0 && time.Now().Before(deadline) {
		line, err := s.br.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, ": ping") {
			pings++
		}
	}
	s.close()
	if pings == 0 {
		t.Fatal("no heartbeat comment")
	}
	last := f.terminalSeq(sr.SharedRunID)
	// Resuming at the terminal event ends the stream without events.
	evs := f.openStream("GET", "/v1/runs/"+sr.SharedRunID+"/events", "", "Last-Event-ID", strconv.FormatInt(last, 10)).readAll()
	if len(evs) != 0 {
		t.Fatalf("past-end stream gave %+v", evs)
	}
}

func TestServer_Invoke_streamsRun(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	evs := f.openStream("POST", "/v1/sessions/sess-1/invoke", `{"pipeline":"three","tenant_id":"acme","input":{"name":"z"}}`).readAll()
	if len(evs) == 0 || evs[len(evs)-1].Kind != "run_succeeded" {
		t.Fatalf("invoke events = %+v", evs)
	}
	var r httpapi.Run
	f.call("GET", "/v1/runs/"+evs[0].Data.SharedRunID, "", http.StatusOK, &r)
	if r.SessionID != "sess-1" || r.Status != "succeeded" {
		t.Fatalf("invoked run = %+v", r)
	}
	f.callErr("POST", "/v1/sessions/sess-1/invoke", `{"pipeline":"three","extra":1}`, http.StatusBadRequest, httpapi.CodeBadRequest)
}

// TestServer_Events_servesTheHubsEntries: after its first read, a stream writes the entries its
// node hands over through the hub, in Seq order, without reading them from the store; entries
// that leave a gap after what it wrote make it read the store instead. The probe entries exist
// only in the hub (the run is final, its ledger complete), so a stream that read the store could
// not write them.
func TestServer_Events_servesTheHubsEntries(t *testing.T) {
	f := newFixture(t, false, func(c *api.Config) { c.SSEPoll = time.Hour })
	f.putPipeline(slowSteps)
	sr := f.submit(`{"pipeline":"slow","tenant_id":"acme"}`)
	last := f.terminalSeq(sr.SharedRunID)
	// Resumed past the end, the stream waits (terminalGrace) for entries that will not come.
	s := f.openStream("GET", "/v1/runs/"+sr.SharedRunID+"/events", "", "Last-Event-ID", strconv.FormatInt(last, 10))
	defer s.close()
	probe := func(seq int64, kind string) *messages.LedgerEntry {
		return &messages.LedgerEntry{SharedRunId: sr.SharedRunID, Seq: seq, Kind: kind, TenantId: "acme"}
	}
	hub := f.node.Hub()
	hub.Appended(sr.SharedRunID, []*messages.LedgerEntry{probe(last+3, "probe_c")}) // a gap: not written first
	hub.Appended(sr.SharedRunID, []*messages.LedgerEntry{probe(last+2, "probe_b"), probe(last+1, "probe_a")})
	for i, want := range []string{"probe_a", "probe_b"} {
		ev, ok := s.next()
		if !ok {
			t.Fatalf("stream ended before %s", want)
		}
		if ev.Kind != want || ev.ID != last+int64(i)+1 {
			t.Fatalf("event %d = %s #%d, want %s #%d", i, ev.Kind, ev.ID, want, last+int64(i)+1)
		}
	}
}

// terminalSeq waits until run id is final and its terminal ledger entry written, and returns
// that entry's Seq. (The run's status turns final just before its terminal entry is appended.)
func (f *fixture) terminalSeq(id string) int64 {
	f.t.Helper()
	f.waitRun(id, isFinal)
	var last int64
	testkit.Eventually(f.t, 10*time.Second, 5*time.Millisecond, func() bool {
		var l httpapi.Ledger
		f.call("GET", "/v1/executions/"+id+"/ledger", "", http.StatusOK, &l)
		end := l.Entries[len(l.Entries)-1]
		last = end.Seq
		return ledger.IsTerminalKind(end.Kind)
	}, "the terminal ledger entry")
	return last
}

// TestServer_Events_outliveWriteTimeout: a stream that lasts longer than the server's
// WriteTimeout still delivers every event to the terminal one, over HTTP/1.1 and h2c.
func TestServer_Events_outliveWriteTimeout(t *testing.T) {
	n := startNode(t)
	if _, err := n.PutPipeline(t.Context(), []byte(slowSteps)); err != nil {
		t.Fatal(err)
	}
	for _, h2c := range []bool{false, true} {
		t.Run(map[bool]string{false: "h1", true: "h2c"}[h2c], func(t *testing.T) {
			srv := httptest.NewUnstartedServer(api.New(api.Config{Node: n, SSEPoll: 50 * time.Millisecond}))
			if err := server.ConfigureHTTP(srv.Config); err != nil {
				t.Fatal(err)
			}
			srv.Config.WriteTimeout = 100 * time.Millisecond // a third of the run
			srv.Start()
			t.Cleanup(srv.Close)
			var protos http.Protocols
			protos.SetHTTP1(!h2c)
			protos.SetUnencryptedHTTP2(h2c)
			tr := &http.Transport{Protocols: &protos}
			t.Cleanup(tr.CloseIdleConnections)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/sessions/s1/invoke",
				strings.NewReader(`{"pipeline":"slow","tenant_id":"acme"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer closeBody(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke = %d", resp.StatusCode)
			}
			if want := map[bool]int{false: 1, true: 2}[h2c]; resp.ProtoMajor != want {
				t.Fatalf("answered over HTTP/%d, want %d", resp.ProtoMajor, want)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read stream: %v (after %q)", err, body)
			}
			if !strings.Contains(string(body), "event: run_succeeded\n") {
				t.Fatalf("stream ended without run_succeeded:\n%s", body)
			}
		})
	}
}
