package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/api"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/server"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/store/redisstore"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// threeNoop is the pipeline of actors' BenchmarkRuns3Step: three chained no-op echo steps.
const threeNoop = `key: three-noop
steps:
  - id: s1
    uses: echo
    with: {value: x}
  - id: s2
    uses: echo
    needs: [s1]
    with: {value: x}
  - id: s3
    uses: echo
    needs: [s2]
    with: {value: x}
`

// benchAPI starts a node configured as actors' benchNode (one dedicated instance of slots run
// slots for tenant "bench") on the given backend, behind a real HTTP server on 127.0.0.1 that
// the returned client reaches over HTTP/1.1, or over HTTP/2 with prior knowledge (h2c: many
// streams on one connection) when h2c is set.
func benchAPI(b *testing.B, backend testkit.Backend, r *testkit.Redis, slots int, h2c bool) (*httptest.Server, *http.Client) {
	b.Helper()
	ctx := context.Background()
	var (
		st  store.Store
		err error
	)
	if backend == testkit.BackendRedis {
		st, err = redisstore.Open(ctx, redisstore.Options{Addr: r.Addr(), Prefix: ids.New("b"), Timeout: 5 * time.Second, PoolSize: 64})
	} else {
		st, err = boltstore.Open(boltstore.Options{Path: filepath.Join(b.TempDir(), "dair.db")})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	})
	settings := &messages.TenantSettings{TenantId: "bench", IsolationMode: messages.IsolationDedicated, RuntimeInstanceIdPrefix: "bench-runtime",
		MaxRuntimeInstances: 1, WorkerCountPerInstance: int32(slots * 2), MaxConcurrentRunsPerInstance: int32(slots),
		LocalQueueCapacity: 1000000, MaxLocalWorkersPerExecution: 64}
	n, err := actors.Start(ctx, actors.Config{NodeID: "bench", Store: st, PumpInterval: 5 * time.Millisecond,
		PumpBatch: 256, PumpParallelism: 64, Instances: []actors.InstanceSpec{{ID: "bench-runtime-1", Settings: settings}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			b.Error(err)
		}
	})
	if _, err := n.PutTenant(ctx, settings); err != nil {
		b.Fatal(err)
	}
	if _, err := n.PutPipeline(ctx, []byte(threeNoop)); err != nil {
		b.Fatal(err)
	}
	if err := testkit.WaitFor(ctx, time.Millisecond, func() (bool, error) {
		d, err := st.GetInstance(ctx, "bench-runtime-1")
		return err == nil && d.CanAcceptRun, nil
	}); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Config{Node: n}))
	if err := server.ConfigureHTTP(srv.Config); err != nil { // what dair serves: HTTP/1.1 and h2c
		b.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP1(!h2c)
	protos.SetUnencryptedHTTP2(h2c)
	srv.Start()
	b.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute, Protocols: &protos}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	// The client's connection is open before the benchmark starts, as the one of a client
	// that keeps calling the API: on a cold h2c transport the first requests, all at once,
	// would each dial a connection of their own.
	resp, err := c.Get(srv.URL + "/healthz")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		b.Fatal(err)
	}
	return srv, c
}

// benchPost posts a run of pipeline for tenant "bench" to url; the caller closes the body.
func benchPost(ctx context.Context, c *http.Client, url, pipeline string) (*http.Response, error) {
	body := `{"pipeline":"` + pipeline + `","tenant_id":"bench"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// benchSubmit posts a run of pipeline for tenant "bench" and returns its id.
func benchSubmit(ctx context.Context, c *http.Client, base, pipeline string) (id string, err error) {
	resp, err := benchPost(ctx, c, base+"/v1/runs", pipeline)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("submit = %d %s", resp.StatusCode, b)
	}
	var sr httpapi.SubmitResponse
	if err := json.Unmarshal(b, &sr); err != nil {
		return "", err
	}
	return sr.SharedRunID, nil
}

// streamIDs reads a run's event stream to its end and returns the event ids and the last kind.
// onFirst, if set, is called after the first event.
func streamIDs(ctx context.Context, c *http.Client, base, runID string, onFirst func()) (idsSeen []int64, kind string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+runID+"/events", nil)
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
		return nil, "", fmt.Errorf("events = %d", resp.StatusCode)
	}
	return readEvents(resp.Body, onFirst)
}

// sseBufs holds the line buffers of readEvents: a client that follows many streams reuses
// its read buffers.
var sseBufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// readEvents reads an event stream to its end and returns the event ids and the last kind.
// onFirst, if set, is called after the first event. It parses as a client following many
// streams would: in reused buffers, without a string per line.
func readEvents(body io.Reader, onFirst func()) (idsSeen []int64, kind string, err error) {
	buf := sseBufs.Get().(*[]byte)
	defer sseBufs.Put(buf)
	sc := bufio.NewScanner(body)
	sc.Buffer(*buf, bufio.MaxScanTokenSize)
	var kindBuf [64]byte
	last := kindBuf[:0]
	idsSeen = make([]int64, 0, 16) // a run's events
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, ok := parseEventID(line[4:])
			if !ok {
				return idsSeen, string(last), fmt.Errorf("bad id line %q", line)
			}
			idsSeen = append(idsSeen, id)
			if len(idsSeen) == 1 && onFirst != nil {
				onFirst()
			}
		case bytes.HasPrefix(line, []byte("event: ")):
			last = append(last[:0], line[7:]...)
		}
	}
	return idsSeen, string(last), sc.Err()
}

// parseEventID parses the decimal event id b.
func parseEventID(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// benchInvoke posts a run of pipeline for tenant "bench" to the invoke endpoint and reads the
// event stream it answers with to its end, returning the last event kind.
func benchInvoke(ctx context.Context, c *http.Client, base, pipeline string) (kind string, err error) {
	resp, err := benchPost(ctx, c, base+"/v1/sessions/bench-session/invoke", pipeline)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("invoke = %d", resp.StatusCode)
	}
	_, kind, err = readEvents(resp.Body, nil)
	return kind, err
}

// BenchmarkHTTPRuns3Step measures runs per second and submit-to-success latency of a 3-step
// no-op pipeline through the HTTP API, 512 runs in flight, on the node configuration of actors'
// BenchmarkRuns3Step (the in-process figure to compare with). Two ways to run one and follow
// it to run_succeeded: submit+events (POST /v1/runs, then GET /v1/runs/{id}/events: two
// requests) and invoke (POST /v1/sessions/{id}/invoke, which answers with the run's event
// stream: one request).
func BenchmarkHTTPRuns3Step(b *testing.B) {
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{AOF: true, AppendFsync: "everysec"})
	for _, backend := range testkit.Backends {
		for _, flow := range []string{"submit+events", "invoke"} {
			for _, proto := range []string{"h1", "h2c"} {
				b.Run(string(backend)+"/"+flow+"/"+proto, func(b *testing.B) { benchHTTPRuns(b, backend, r, flow == "invoke", proto == "h2c") })
			}
		}
	}
}

func benchHTTPRuns(b *testing.B, backend testkit.Backend, r *testkit.Redis, invoke, h2c bool) {
	srv, c := benchAPI(b, backend, r, 2048, h2c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu     sync.Mutex // guards lat
		lat    = make([]time.Duration, 0, b.N)
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, 512)
	b.ResetTimer()
	cpu0 := markCPU(b)
	start := time.Now()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			t0 := time.Now()
			var (
				kind string
				err  error
			)
			if invoke {
				kind, err = benchInvoke(ctx, c, srv.URL, "three-noop")
			} else {
				var id string
				if id, err = benchSubmit(ctx, c, srv.URL, "three-noop"); err == nil {
					_, kind, err = streamIDs(ctx, c, srv.URL, id, nil)
				}
			}
			if err != nil || kind != messages.KindRunSucceeded {
				failed.Add(1)
				return
			}
			d := time.Since(t0)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	logCPU(b, cpu0, b.N, el)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d runs did not succeed", f)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "runs/s")
	testkit.ReportLatency(b, lat)
}

// BenchmarkRunLatency measures the end-to-end latency of one 3-step no-op run at a time
// through the HTTP API: POST /v1/runs until the run's event stream delivers its terminal
// event (run_succeeded). It reports p50/p99 per backend (the embedded store with fsync).
func BenchmarkRunLatency(b *testing.B) {
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{AOF: true, AppendFsync: "everysec"})
	for _, backend := range testkit.Backends {
		b.Run(string(backend), func(b *testing.B) {
			srv, c := benchAPI(b, backend, r, 64, false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				id, err := benchSubmit(ctx, c, srv.URL, "three-noop")
				if err != nil {
					b.Fatal(err)
				}
				_, kind, err := streamIDs(ctx, c, srv.URL, id, nil)
				if err != nil {
					b.Fatal(err)
				}
				if kind != messages.KindRunSucceeded {
					b.Fatalf("run %s ended with %q", id, kind)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			testkit.ReportLatency(b, lat)
		})
	}
}

// cpuMark is the process's CPU time and read and write system calls so far.
type cpuMark struct {
	cpu           time.Duration
	reads, writes int64
}

// markCPU returns the process's CPU time (user + system: the server and the benchmark's
// client, not Redis) and, where /proc/self/io exists, its read and write system calls.
func markCPU(b *testing.B) cpuMark {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	m := cpuMark{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), reads: -1, writes: -1}
	if io, err := os.ReadFile("/proc/self/io"); err == nil {
		for _, line := range strings.Split(string(io), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil:
			case k == "syscr":
				m.reads = n
			case k == "syscw":
				m.writes = n
			}
		}
	}
	return m
}

// logCPU logs the process CPU time and system calls per run since m0: on a shared machine they
// judge a change better than the wall-clock rate.
func logCPU(b *testing.B, m0 cpuMark, runs int, elapsed time.Duration) {
	m, n := markCPU(b), int64(max(runs, 1))
	if m0.reads < 0 || m.reads < 0 {
		b.Logf("%d runs in %v: %v CPU per run", runs, elapsed, (m.cpu-m0.cpu)/time.Duration(n))
		return
	}
	b.Logf("%d runs in %v: %v CPU per run, %.1f reads and %.1f writes per run", runs, elapsed, (m.cpu-m0.cpu)/time.Duration(n),
		float64(m.reads-m0.reads)/float64(n), float64(m.writes-m0.writes)/float64(n))
}
