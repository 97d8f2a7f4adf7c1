package testkit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/store/redisstore"
)

// Backend names a store backend for the node harness.
type Backend string

// Backends.
const (
	BackendEmbedded Backend = "embedded"
	BackendRedis    Backend = "redis"
)

// Backends lists both backends, for tests that must pass on each.
var Backends = []Backend{BackendEmbedded, BackendRedis}

// NodeOptions configures StartNode. Config's Store is filled in by the harness.
type NodeOptions struct {
	Backend Backend
	// Redis to use for the redis backend; nil starts one for the test.
	Redis *Redis
	// Config is passed to actors.Start (Store is set by the harness; zero timings get fast
	// test defaults: pump 10 ms, heartbeat 100 ms, recovery 100 ms).
	Config actors.Config
}

// StartNode opens a fresh store of the backend and starts a node on it, in process. The node
// and store are stopped with t.Cleanup.
func StartNode(t testing.TB, opts NodeOptions) *actors.Node {
	t.Helper()
	st := OpenStore(t, opts.Backend, opts.Redis)
	cfg := opts.Config
	cfg.Store = st
	if cfg.PumpInterval == 0 {
		cfg.PumpInterval = 10 * time.Millisecond
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 100 * time.Millisecond
	}
	if cfg.RecoveryInterval == 0 {
		cfg.RecoveryInterval = 100 * time.Millisecond
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "test-node"
	}
	n, err := actors.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testkit: start node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			var outlived *actors.OutlivedStopError
			if errors.As(err, &outlived) {
				t.Logf("testkit: the goroutines that outlived the stop:\n%s", outlived.Stacks)
			}
			t.Errorf("testkit: stop node: %v", err)
		}
	})
	return n
}

// OpenStore opens a fresh, empty store of the backend for t (redis: a unique key prefix on r,
// or on a Redis started for t when r is nil). It is closed with t.Cleanup.
func OpenStore(t testing.TB, b Backend, r *Redis) store.Store {
	t.Helper()
	var (
		st  store.Store
		err error
	)
	switch b {
	case BackendEmbedded, "":
		st, err = boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	case BackendRedis:
		if r == nil {
			RequireRedis(t)
			r = StartRedis(t, RedisOptions{})
		}
		st, err = redisstore.Open(context.Background(), redisstore.Options{Addr: r.Addr(), Prefix: ids.New("t"), Timeout: 5 * time.Second})
	default:
		err = fmt.Errorf("unknown backend %q", b)
	}
	if err != nil {
		t.Fatalf("testkit: open %s store: %v", b, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("testkit: close store: %v", err)
		}
	})
	return st
}
