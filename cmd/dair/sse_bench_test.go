package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// Sizes of BenchmarkSSEFanout: fanoutRuns runs, fanoutPerRun streams on each.
const (
	fanoutRuns   = 100
	fanoutPerRun = 10
)

// fanoutPipeline waits long enough for every stream to connect, then makes three more events.
const fanoutPipeline = `key: fan
steps:
  - id: wait
    uses: sleep
    with: {duration: 2s}
  - id: a
    uses: echo
    needs: [wait]
    with: {value: a}
  - id: b
    uses: echo
    needs: [a]
    with: {value: b}
`

// startDevTB starts `dair dev` for a benchmark and waits for /readyz; cleanup kills it.
func startDevTB(tb testing.TB, data, pipelines string) (url string, pid int) {
	tb.Helper()
	addr := fanoutAddr(tb)
	logs := &syncBuffer{}
	cmd := exec.Command(dairBin, "dev", "--data", data, "--http", addr, "--pipelines", pipelines, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(tb, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			tb.Logf("kill dev: %v", err)
		}
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url = "http://" + addr
	require.NoError(tb, client.New(url, "").WaitReady(ctx, 20*time.Millisecond), "dev not ready; logs:\n%s", logs.String())
	return url, cmd.Process.Pid
}

func fanoutAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := ln.Addr().String()
	require.NoError(tb, ln.Close())
	return addr
}

// rssOf returns the resident set size of process pid from /proc.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS line")
}

// benchCall sends a JSON request and decodes a 2xx answer into out (if non-nil).
func benchCall(ctx context.Context, c *http.Client, method, url, body string, out any) (err error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s = %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// stream is what one event stream delivered: each event's id and when it arrived, and the
// kind of the last event.
type stream struct {
	ids  []int64
	at   []time.Time
	last string
}

// readEvents reads an event stream to its end; connected is called once, after the first
// event. It is safe to call from any goroutine. On error it returns what arrived before.
func readEvents(ctx context.Context, c *http.Client, url string, connected func()) (st stream, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return st, err
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s = %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, err := strconv.ParseInt(string(line[4:]), 10, 64)
			if err != nil {
				return st, fmt.Errorf("bad id line %q: %w", line, err)
			}
			st.ids = append(st.ids, id)
			st.at = append(st.at, time.Now())
			if len(st.ids) == 1 {
				connected()
			}
		case bytes.HasPrefix(line, []byte("event: ")):
			st.last = string(line[7:])
		}
	}
	return st, sc.Err()
}

// interval is a span of time during which events arrived.
type interval struct{ from, to time.Time }

// unionLength returns the length of the union of spans.
func unionLength(spans []interval) time.Duration {
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	var total time.Duration
	var cur interval
	for i, sp := range spans {
		switch {
		case i == 0:
			cur = sp
		case sp.from.After(cur.to):
			total += cur.to.Sub(cur.from)
			cur = sp
		case sp.to.After(cur.to):
			cur.to = sp.to
		}
	}
	if len(spans) > 0 {
		total += cur.to.Sub(cur.from)
	}
	return total
}

// streamSpans returns when st was streaming: from its first event to its last, without the
// wait between the event before seq sleepEnd (the ledger entry that ends the pipeline's sleep
// step) and that entry, when no event arrives.
func streamSpans(st stream, sleepEnd int64) []interval {
	if len(st.ids) == 0 {
		return nil
	}
	k := sort.Search(len(st.ids), func(i int) bool { return st.ids[i] >= sleepEnd })
	var out []interval
	if k > 0 {
		out = append(out, interval{st.at[0], st.at[k-1]})
	}
	if k < len(st.ids) {
		out = append(out, interval{st.at[k], st.at[len(st.ids)-1]})
	}
	return out
}

// BenchmarkSSEFanout opens fanoutRuns*fanoutPerRun (1,000) concurrent event streams on one
// `dair dev` process, fanoutPerRun per run, while the runs execute. Each stream should receive
// its run's whole ledger (ids 1..n, no gap, no duplicate) through run_succeeded. It reports
// what it observed: the node's resident memory per open stream (bytes/stream, from /proc VmRSS
// before and with all streams connected); deliveries/s, the events delivered divided by the
// streaming window (the union over streams of the time from a stream's first event to its
// last, leaving out each run's 2 s sleep step, when its streams wait with nothing to deliver);
// dropped, the events missing from or repeated in a stream compared with the run's ledger,
// summed over all streams and iterations; and stream-errors, the streams that failed or ended
// before run_succeeded (logged; their events still count).
func BenchmarkSSEFanout(b *testing.B) {
	pipes := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(pipes, "fan.yaml"), []byte(fanoutPipeline), 0o600))
	url, pid := startDevTB(b, b.TempDir(), pipes)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := &http.Transport{MaxIdleConns: 2 * fanoutRuns * fanoutPerRun, MaxIdleConnsPerHost: 2 * fanoutRuns * fanoutPerRun}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	require.NoError(b, benchCall(ctx, c, "PUT", url+"/v1/tenants/fan", `{"isolation_mode":"dedicated","max_runtime_instances":1,`+
		`"worker_count_per_instance":256,"max_concurrent_runs_per_instance":128,"local_queue_capacity":1000}`, nil))

	streams := fanoutRuns * fanoutPerRun
	var (
		perStream, delivered float64
		dropped, failed      int
		window               time.Duration
	)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runIDs := make([]string, fanoutRuns)
		for r := range runIDs {
			var sub httpapi.SubmitResponse
			require.NoError(b, benchCall(ctx, c, "POST", url+"/v1/runs", `{"pipeline":"fan","tenant_id":"fan"}`, &sub))
			runIDs[r] = sub.SharedRunID
		}
		rss0, err := rssOf(pid)
		require.NoError(b, err)
		var (
			connected sync.WaitGroup
			finished  sync.WaitGroup
			mu        sync.Mutex // guards got, errs
			got       = make(map[string][]stream, fanoutRuns)
			errs      []error
		)
		connected.Add(streams)
		for _, id := range runIDs {
			for s := 0; s < fanoutPerRun; s++ {
				finished.Add(1)
				go func() {
					defer finished.Done()
					once := sync.OnceFunc(connected.Done)
					st, err := readEvents(ctx, c, url+"/v1/runs/"+id+"/events", once)
					once()
					mu.Lock()
					defer mu.Unlock()
					if err == nil && st.last != messages.KindRunSucceeded {
						err = fmt.Errorf("run %s stream ended with %q", id, st.last)
					}
					if err != nil {
						errs = append(errs, err)
					}
					got[id] = append(got[id], st)
				}()
			}
		}
		connected.Wait()
		rss1, err := rssOf(pid)
		require.NoError(b, err)
		finished.Wait()
		failed += len(errs)
		for k, err := range errs[:min(len(errs), 5)] {
			b.Logf("stream error %d of %d: %v", k+1, len(errs), err)
		}

		var spans []interval
		for _, id := range runIDs {
			var led httpapi.Ledger
			require.NoError(b, benchCall(ctx, c, "GET", url+"/v1/executions/"+id+"/ledger", "", &led))
			sleepEnd := int64(len(led.Entries) + 1)
			for _, e := range led.Entries {
				if e.Kind == messages.KindStepSucceeded && e.StepID == "wait" {
					sleepEnd = e.Seq
					break
				}
			}
			for _, st := range got[id] {
				delivered += float64(len(st.ids))
				spans = append(spans, streamSpans(st, sleepEnd)...)
				if len(st.ids) != len(led.Entries) {
					dropped += abs(len(led.Entries) - len(st.ids))
					continue
				}
				for k, v := range st.ids {
					if v != int64(k+1) {
						dropped++
					}
				}
			}
		}
		window += unionLength(spans)
		perStream += float64(rss1-rss0) / float64(streams)
	}
	b.StopTimer()
	if dropped > 0 || failed > 0 {
		b.Logf("observed %d dropped or repeated events and %d stream errors", dropped, failed)
	}
	b.ReportMetric(perStream/float64(b.N), "bytes/stream")
	b.ReportMetric(delivered/window.Seconds(), "deliveries/s")
	b.ReportMetric(float64(dropped), "dropped")
	b.ReportMetric(float64(failed), "stream-errors")
	b.ReportMetric(float64(streams), "streams")
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
