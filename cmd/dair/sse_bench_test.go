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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// readEvents reads an event stream to its end and returns each event's id and the last kind;
// connected is called once, after the first event. It is safe to call from any goroutine.
func readEvents(ctx context.Context, c *http.Client, url string, connected func()) (ids []int64, last string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s = %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, err := strconv.ParseInt(string(line[4:]), 10, 64)
			if err != nil {
				return ids, last, fmt.Errorf("bad id line %q: %w", line, err)
			}
			ids = append(ids, id)
			if len(ids) == 1 {
				connected()
			}
		case bytes.HasPrefix(line, []byte("event: ")):
			last = string(line[7:])
		}
	}
	return ids, last, sc.Err()
}

// BenchmarkSSEFanout opens fanoutRuns*fanoutPerRun (1,000) concurrent event streams on one
// `dair dev` process, fanoutPerRun per run, while the runs execute. Every stream must receive
// its run's whole ledger (ids 1..n, no gap, no duplicate) through run_succeeded. It reports
// the node's resident memory per open stream (bytes/stream, from /proc VmRSS before and with
// all streams connected), the events delivered per second (msgs/s) and dropped events.
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
	var perStream, delivered, dropped, elapsed float64
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
		start := time.Now()
		var (
			connected sync.WaitGroup
			finished  sync.WaitGroup
			mu        sync.Mutex // guards got, errs
			got       = make(map[string][][]int64, fanoutRuns)
			errs      []error
			events    atomic.Int64
		)
		connected.Add(streams)
		for _, id := range runIDs {
			for s := 0; s < fanoutPerRun; s++ {
				finished.Add(1)
				go func() {
					defer finished.Done()
					once := sync.OnceFunc(connected.Done)
					ids, last, err := readEvents(ctx, c, url+"/v1/runs/"+id+"/events", once)
					once()
					events.Add(int64(len(ids)))
					mu.Lock()
					defer mu.Unlock()
					if err == nil && last != messages.KindRunSucceeded {
						err = fmt.Errorf("run %s stream ended with %q", id, last)
					}
					if err != nil {
						errs = append(errs, err)
					}
					got[id] = append(got[id], ids)
				}()
			}
		}
		connected.Wait()
		rss1, err := rssOf(pid)
		require.NoError(b, err)
		finished.Wait()
		el := time.Since(start)
		require.Empty(b, errs)

		lost := 0
		for _, id := range runIDs {
			var led httpapi.Ledger
			require.NoError(b, benchCall(ctx, c, "GET", url+"/v1/executions/"+id+"/ledger", "", &led))
			for _, ids := range got[id] {
				if len(ids) != len(led.Entries) {
					lost += abs(len(led.Entries) - len(ids))
					continue
				}
				for k, v := range ids {
					if v != int64(k+1) {
						lost++
					}
				}
			}
		}
		require.Zero(b, lost, "streams dropped or repeated events")
		perStream += float64(rss1-rss0) / float64(streams)
		delivered += float64(events.Load())
		dropped += float64(lost)
		elapsed += el.Seconds()
	}
	b.StopTimer()
	b.ReportMetric(perStream/float64(b.N), "bytes/stream")
	b.ReportMetric(delivered/elapsed, "msgs/s")
	b.ReportMetric(dropped, "dropped")
	b.ReportMetric(float64(streams), "streams")
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
