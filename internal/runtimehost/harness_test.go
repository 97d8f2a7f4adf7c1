package runtimehost_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/runtimehost"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	grpcprov "github.com/dairuntime/dair/providers/grpc"
	httpprov "github.com/dairuntime/dair/providers/http"
	"github.com/dairuntime/dair/providers/local"
	"github.com/dairuntime/dair/providers/rcq"
	"github.com/dairuntime/dair/providers/remote"
	"github.com/dairuntime/dair/testkit"
)

// remoteTransports are the transports a Host serves.
var remoteTransports = []string{runtimehost.TransportHTTP, runtimehost.TransportGRPC, runtimehost.TransportRCQ}

// capture is a step handler that records the snapshot and request of every call.
type capture struct {
	mu   sync.Mutex // guards reqs
	reqs []*step.Request
}

func (c *capture) Run(_ context.Context, req *step.Request) (step.Result, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	return step.Result{Output: map[string]any{"ok": true}}, nil
}

func (c *capture) calls() []*step.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*step.Request(nil), c.reqs...)
}

// rig is one node whose instance "<transport>-1" is served over a transport Host, and whose
// providers reach it through that transport.
type rig struct {
	node     *actors.Node
	host     *runtimehost.Host
	provider providers.Dispatcher
	capture  *capture
	instance string
}

// newProvider returns the provider of transport over rdb.
func newProvider(t testing.TB, transport string, rdb redis.UniversalClient, rc remote.Config) providers.Dispatcher {
	switch transport {
	case runtimehost.TransportHTTP:
		p := httpprov.New(httpprov.Config{Remote: rc})
		t.Cleanup(p.Close)
		return p
	case runtimehost.TransportGRPC:
		p := grpcprov.New(grpcprov.Config{Remote: rc})
		t.Cleanup(func() { require.NoError(t, p.Close()) })
		return p
	default:
		return rcq.New(rcq.Config{Client: rdb, Remote: rc})
	}
}

// startRig starts a node with every role on a Redis store, its instance served over transport.
func startRig(t testing.TB, r *testkit.Redis, transport string, cfg actors.Config, settings *messages.TenantSettings) *rig {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 64})
	t.Cleanup(func() { require.NoError(t, rdb.Close()) })
	h, err := runtimehost.Bind(runtimehost.Config{Transport: transport, Redis: rdb, ConsumerName: "test-" + transport})
	require.NoError(t, err)
	cp := &capture{}
	reg := step.NewRegistry()
	require.NoError(t, handlers.Register(reg, handlers.Options{}))
	require.NoError(t, reg.Register("capture", cp))
	id := transport + "-1"
	prov := newProvider(t, transport, rdb, remote.Config{Timeout: 2 * time.Second})
	cfg.Handlers = reg
	cfg.Providers = append(cfg.Providers, prov)
	cfg.Instances = []actors.InstanceSpec{{ID: id, Settings: settings, Transport: h.InstanceTransport(id)}}
	n := testkit.StartNode(t, testkit.NodeOptions{Backend: testkit.BackendRedis, Redis: r, Config: cfg})
	lp, ok := n.Providers().Lookup(local.Name)
	require.True(t, ok)
	h.Serve(runtimehost.Target{Backend: lp.(remote.Backend), Instances: n.LocalInstanceIDs})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, h.Stop(ctx))
	})
	return &rig{node: n, host: h, provider: prov, capture: cp, instance: id}
}
