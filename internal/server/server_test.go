package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/messages"
)

// started is a Run in a goroutine with its bound address.
type started struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startRun runs opts until stop is called; it fails the test if the node is not ready in time.
func startRun(t *testing.T, opts Options) *started {
	t.Helper()
	ready := make(chan net.Addr, 1)
	opts.HTTPAddr = "127.0.0.1:0"
	opts.LogOutput = io.Discard
	opts.OnReady = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- Run(ctx, opts) }()
	select {
	case a := <-ready:
		s.addr = "http://" + a.String()
	case err := <-s.done:
		cancel()
		t.Fatalf("run ended before ready: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("node not ready within 20s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
		}
	})
	return s
}

// stop cancels the Run and returns its error.
func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // keep it for the cleanup
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop within 20s")
		return nil
	}
}

func TestRun_Serve_submitWaitRestart(t *testing.T) {
	data := t.TempDir()
	pipes := writeFiles(t, map[string]string{"hello.yaml": strings.ReplaceAll(goodPipeline, "%s", "hello")})
	opts := DevOptions()
	opts.DataDir, opts.PipelinesDir = data, pipes

	s := startRun(t, opts)
	c := client.New(s.addr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Ready(ctx))
	sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "hello", TenantID: "acme"})
	require.NoError(t, err)
	var kinds []string
	run, err := c.Follow(ctx, sub.SharedRunID, func(_ int64, kind string, _ []byte) error {
		kinds = append(kinds, kind)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, run.Status)
	require.Contains(t, kinds, messages.KindStepSucceeded)
	require.NoError(t, s.stop(t))

	s2 := startRun(t, opts)
	got, err := client.New(s2.addr, "").GetRun(ctx, sub.SharedRunID)
	require.NoError(t, err)
	require.Equal(t, messages.RunSucceeded, got.Status)
	require.NoError(t, s2.stop(t))
}

func TestRun_Serve_jwtAuth(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("test-secret-0123456789\n"), 0o600))
	opts := DevOptions()
	opts.DataDir, opts.Auth, opts.JWTSecretFile = t.TempDir(), AuthJWT, secret
	s := startRun(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := client.New(s.addr, "").ListRuns(ctx, "", "")
	var ce *client.Error
	require.True(t, errors.As(err, &ce), err)
	require.Equal(t, http.StatusUnauthorized, ce.Status)

	tok, err := auth.MintHS256([]byte("test-secret-0123456789"), auth.Claims{TenantID: "acme", Roles: []string{auth.RoleAdmin},
		ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = client.New(s.addr, tok).ListRuns(ctx, "", "")
	require.NoError(t, err)
}

func TestRun_Start_errors(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(t *testing.T, o *Options)
		wantIs  error
		wantMsg string
	}{
		{"bad pipeline file", func(t *testing.T, o *Options) {
			o.PipelinesDir = writeFiles(t, map[string]string{"broken.yaml": "key: broken\nsteps: []\n"})
		}, ErrBadPipeline, "broken.yaml"},
		{"unknown handler", func(t *testing.T, o *Options) {
			o.PipelinesDir = writeFiles(t, map[string]string{"h.yml": "key: h\nsteps:\n  - id: a\n    uses: nope\n"})
		}, ErrBadPipeline, "unknown_handler"},
		{"non-loopback dev", func(_ *testing.T, o *Options) { o.HTTPAddr = "0.0.0.0:0" }, ErrInvalidOptions, "loopback"},
		{"missing secret file", func(t *testing.T, o *Options) {
			o.Auth, o.JWTSecretFile = AuthJWT, filepath.Join(t.TempDir(), "none")
		}, ErrInvalidOptions, "secret file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DevOptions()
			o.DataDir, o.HTTPAddr, o.LogOutput = t.TempDir(), "127.0.0.1:0", io.Discard
			tc.mutate(t, &o)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := Run(ctx, o)
			require.ErrorIs(t, err, tc.wantIs)
			require.ErrorContains(t, err, tc.wantMsg)
			// The store was closed: it opens again.
			st, err := OpenStore(ctx, "bolt://"+filepath.Join(o.DataDir, "dair.db"))
			require.NoError(t, err)
			require.NoError(t, st.Close())
		})
	}
}

// TestRun_Serve_h2cAndHTTP1OnOnePort: the API answers HTTP/1.1 and HTTP/2 with prior knowledge
// on the same port, event streams included.
func TestRun_Serve_h2cAndHTTP1OnOnePort(t *testing.T) {
	pipes := writeFiles(t, map[string]string{"hello.yaml": strings.ReplaceAll(goodPipeline, "%s", "hello")})
	opts := DevOptions()
	opts.DataDir, opts.PipelinesDir = t.TempDir(), pipes
	s := startRun(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		proto string
		set   func(p *http.Protocols)
	}{
		{"HTTP/1.1", func(p *http.Protocols) { p.SetHTTP1(true) }},
		{"HTTP/2.0", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }},
	} {
		var p http.Protocols
		tc.set(&p)
		tr := &http.Transport{Protocols: &p}
		t.Cleanup(tr.CloseIdleConnections)
		hc := &http.Client{Transport: tr}
		c := client.New(s.addr, "")
		c.HTTP = hc
		sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "hello", TenantID: "acme"})
		require.NoError(t, err, tc.proto)
		run, err := c.Follow(ctx, sub.SharedRunID, func(int64, string, []byte) error { return nil })
		require.NoError(t, err, tc.proto)
		require.Equal(t, messages.RunSucceeded, run.Status, tc.proto)
		resp, err := hc.Get(s.addr + "/v1/runs/" + sub.SharedRunID)
		require.NoError(t, err, tc.proto)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, tc.proto, resp.Proto)
	}
}
