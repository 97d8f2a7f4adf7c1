package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigureHTTP_manyStreams: a server set up by ConfigureHTTP carries more open streams
// than net/http's default limit per HTTP/2 connection (250) on one h2c connection, each
// answered in full, answers HTTP/1.1 on the same port, and shuts down gracefully.
func TestConfigureHTTP_manyStreams(t *testing.T) {
	const streams = 300
	release := make(chan struct{})
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		if _, err := fmt.Fprintf(w, "first %s\n", id); err != nil {
			return
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = fmt.Fprintf(w, "last %s\n", id) // a failed write shows as a short body below
	}))
	require.NoError(t, ConfigureHTTP(srv.Config))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	client := func(h2c bool) *http.Client {
		var p http.Protocols
		p.SetHTTP1(!h2c)
		p.SetUnencryptedHTTP2(h2c)
		tr := &http.Transport{Protocols: &p}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	h2 := client(true)
	warm, err := h2.Get(srv.URL + "/?id=warm") // the client learns the server's settings
	require.NoError(t, err)
	require.NoError(t, warm.Body.Close())
	var (
		firsts sync.WaitGroup
		wg     sync.WaitGroup
		mu     sync.Mutex // guards errs
		errs   []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for i := range streams {
		firsts.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			gotFirst := false
			defer func() {
				if !gotFirst {
					firsts.Done()
				}
			}()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/?id=%d", srv.URL, i), nil)
			if err != nil {
				fail(err)
				return
			}
			resp, err := h2.Do(req)
			if err != nil {
				fail(err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.ProtoMajor != 2 {
				fail(fmt.Errorf("stream %d answered over %s", i, resp.Proto))
				return
			}
			br := bufio.NewReader(resp.Body)
			first, err := br.ReadString('\n')
			gotFirst = true
			firsts.Done()
			rest, rerr := io.ReadAll(br)
			if err != nil || rerr != nil || first+string(rest) != fmt.Sprintf("first %d\nlast %d\n", i, i) {
				fail(fmt.Errorf("stream %d: %q %q (%v, %v)", i, first, rest, err, rerr))
			}
		}()
	}
	firsts.Wait() // every stream is open and has its first line
	close(release)
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, int64(1), conns.Load(), "h2c connections")

	resp, err := client(false).Get(srv.URL + "/?id=h1")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "HTTP/1.1", resp.Proto)
	require.True(t, strings.HasPrefix(string(body), "first h1\n"))

	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	require.NoError(t, srv.Config.Shutdown(sctx))
}
