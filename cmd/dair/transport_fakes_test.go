package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/rcq"
)

// Fault modes of a faulty runtime endpoint.
const (
	modeHang   = "hang"   // never answers
	modeReject = "reject" // refuses every command (not retryable)
	modeFail   = "fail"   // fails every command (retryable)
)

// faultyEndpoint is an external runtime endpoint of one transport registered as a tenant's
// instance: it hangs, refuses or fails every command, and counts them.
type faultyEndpoint struct {
	endpoint string            // the descriptor's endpoint
	metadata map[string]string // the descriptor's metadata (the command queue key)
	calls    atomic.Int64
}

// newFaultyEndpoint starts the faulty endpoint of transport for instance id in mode; it stops
// with the test.
func newFaultyEndpoint(t *testing.T, transport, id, mode, redisURL string) *faultyEndpoint {
	f := &faultyEndpoint{}
	switch transport {
	case "grpc":
		f.serveGRPC(t, mode)
	case "redis-command-queue":
		f.serveRCQ(t, id, mode, redisURL)
	default:
		f.serveHTTP(t, mode)
	}
	return f
}

func (f *faultyEndpoint) serveHTTP(t *testing.T, mode string) {
	stop := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		switch mode {
		case modeHang:
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		case modeReject:
			http.Error(w, "unknown pipeline version", http.StatusUnprocessableEntity)
		default:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() { close(stop); s.Close() })
	f.endpoint = s.URL
}

// faultyService answers every runtime command with its mode.
type faultyService struct {
	messages.UnimplementedRuntimeInstanceServiceServer
	f    *faultyEndpoint
	mode string
	stop chan struct{}
}

func (s *faultyService) answer(ctx context.Context) error {
	s.f.calls.Add(1)
	switch s.mode {
	case modeHang:
		select {
		case <-ctx.Done():
		case <-s.stop:
		}
		return status.Error(codes.DeadlineExceeded, "hung")
	case modeReject:
		return status.Error(codes.FailedPrecondition, "unknown pipeline version")
	}
	return status.Error(codes.ResourceExhausted, "overloaded")
}

func (s *faultyService) Dispatch(ctx context.Context, _ *messages.DispatchRequest) (*messages.ProviderResult, error) {
	return nil, s.answer(ctx)
}

func (s *faultyService) QueueStatus(ctx context.Context, _ *messages.QueueStatusRequest) (*messages.QueueStatus, error) {
	return nil, s.answer(ctx)
}

func (s *faultyService) Heartbeat(ctx context.Context, _ *messages.HeartbeatRequest) (*messages.HeartbeatResponse, error) {
	return nil, s.answer(ctx)
}

func (f *faultyEndpoint) serveGRPC(t *testing.T, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	svc := &faultyService{f: f, mode: mode, stop: make(chan struct{})}
	messages.RegisterRuntimeInstanceServiceServer(s, svc)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		close(svc.stop)
		s.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("faulty grpc endpoint: %v", err)
		}
	})
	f.endpoint = "grpc://" + ln.Addr().String()
}

// serveRCQ consumes instance id's command stream: hang reads commands and never answers;
// reject answers each with bytes that are no RuntimeCommandResult (not retryable).
func (f *faultyEndpoint) serveRCQ(t *testing.T, id, mode, redisURL string) {
	key := rcq.StreamKey(id)
	f.endpoint, f.metadata = key, map[string]string{rcq.MetadataQueueKey: key}
	opts, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	ctx, cancel := context.WithCancel(context.Background())
	err = rdb.XGroupCreateMkStream(ctx, key, rcq.Group, "$").Err()
	if err != nil && err.Error() != "BUSYGROUP Consumer Group name already exists" {
		require.NoError(t, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: rcq.Group, Consumer: "faulty", Streams: []string{key, ">"},
				Count: 16, Block: 100 * time.Millisecond}).Result()
			if err != nil {
				continue
			}
			for _, m := range res[0].Messages {
				f.calls.Add(1)
				raw, _ := m.Values["c"].(string)
				cmd := &messages.RuntimeCommand{}
				if mode == modeReject && proto.Unmarshal([]byte(raw), cmd) == nil && cmd.GetReplyTo() != "" {
					rdb.RPush(ctx, cmd.GetReplyTo(), "\xff\xff not a result")
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		require.NoError(t, rdb.Close())
	})
}
