package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/testsupport"
)

// Process cluster defaults.
const (
	// clusterReadyTimeout bounds how long a node may take to answer /readyz.
	clusterReadyTimeout = 30 * time.Second
	// clusterTopologyTimeout bounds WaitTopology.
	clusterTopologyTimeout = time.Minute
	// clusterLogTail is how much of each node's log is printed when a test fails.
	clusterLogTail = 16 << 10
)

// ErrNodeDown is returned by ProcessNode methods that need a running node when it was killed
// or has exited.
var ErrNodeDown = errors.New("testkit: node is not running")

// ProcessClusterOptions configures StartProcessCluster. The zero value of each field means
// its default.
type ProcessClusterOptions struct {
	// Binary is the path of a built dair binary. Required.
	Binary string
	// N is the number of nodes. Default 3.
	N int
	// RedisURL is the shared store, redis://HOST:PORT/DB (see StartRedis). Required.
	RedisURL string
	// Profile is the --cluster-profile: "local" (tuned failure detection) or "lan"
	// (memberlist's LAN defaults). Default "local".
	Profile string
	// Roles gives node i the roles Roles[i] (--roles); a missing or empty entry means both
	// control-plane and runtime.
	Roles [][]string
	// NodeIDs names the nodes; a missing entry i means "n<i+1>".
	NodeIDs []string
	// LogLevel is every node's --log-level. Default "warn".
	LogLevel string
	// ExtraArgs are appended to every node's command line.
	ExtraArgs []string
	// NodeArgs gives node i the extra arguments NodeArgs[i], after ExtraArgs (for example
	// --agents echo,counter on some nodes only); a missing entry means none.
	NodeArgs [][]string
}

// ProcessCluster is N `dair node` processes on one shared Redis store, each joined to all the
// others, started with the test-only --fault-injection flag so Partition and Heal work. Every
// node's membership and HTTP addresses are fixed at start, so Restart brings a node back on
// the same addresses. The processes are killed with t.Cleanup; when the test failed, the tail
// of each node's log is printed.
//
// Methods that fail the test (StartProcessCluster, WaitTopology and the ProcessNode actions)
// must be called from the test's goroutine.
type ProcessCluster struct {
	t     testing.TB
	opts  ProcessClusterOptions
	nodes []*ProcessNode
}

// StartProcessCluster starts opts.N nodes concurrently and returns once every node answers
// GET /readyz (it does not wait for the membership to converge: see WaitTopology). It fails
// the test when a node cannot start.
func StartProcessCluster(t testing.TB, opts ProcessClusterOptions) *ProcessCluster {
	t.Helper()
	if opts.Binary == "" || opts.RedisURL == "" {
		t.Fatalf("testkit: start process cluster: Binary and RedisURL are required")
	}
	if opts.N <= 0 {
		opts.N = 3
	}
	if opts.Profile == "" {
		opts.Profile = "local"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = os.Getenv("DAIR_TEST_LOG_LEVEL")
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	c := &ProcessCluster{t: t, opts: opts}
	for i := 0; i < opts.N; i++ {
		id := "n" + strconv.Itoa(i+1)
		if i < len(opts.NodeIDs) && opts.NodeIDs[i] != "" {
			id = opts.NodeIDs[i]
		}
		var roles []string
		if i < len(opts.Roles) {
			roles = opts.Roles[i]
		}
		bind, err := freeLoopbackAddr()
		if err != nil {
			t.Fatalf("testkit: start process cluster: %v", err)
		}
		httpAddr, err := freeLoopbackAddr()
		if err != nil {
			t.Fatalf("testkit: start process cluster: %v", err)
		}
		var extra []string
		if i < len(opts.NodeArgs) {
			extra = opts.NodeArgs[i]
		}
		c.nodes = append(c.nodes, &ProcessNode{c: c, id: id, bind: bind, http: httpAddr, roles: roles, extra: extra, logs: &logBuffer{}})
	}
	t.Cleanup(c.cleanup)
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.start()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testkit: start process cluster: %v", err)
	}
	return c
}

// Node returns node i (0-based). It panics when i is out of range, like a slice index.
func (c *ProcessCluster) Node(i int) *ProcessNode { return c.nodes[i] }

// Nodes returns every node in start order. The caller owns the returned slice.
func (c *ProcessCluster) Nodes() []*ProcessNode { return append([]*ProcessNode(nil), c.nodes...) }

// Len returns the number of nodes.
func (c *ProcessCluster) Len() int { return len(c.nodes) }

// NodeByID returns the node with logical id, or nil.
func (c *ProcessCluster) NodeByID(id string) *ProcessNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// Reachable returns the nodes that are running, not SIGSTOPped and not partitioned: the ones
// whose HTTP API and membership view are current.
func (c *ProcessCluster) Reachable() []*ProcessNode {
	var out []*ProcessNode
	for _, n := range c.nodes {
		if n.reachable() {
			out = append(out, n)
		}
	}
	return out
}

// WaitTopology polls every reachable node's GET /v1/cluster/members until each lists exactly
// n members, among them every reachable node's current member id (a node restarted a moment
// ago is a new member, while its old one may still be listed), and fails the test when that
// has not happened within a minute.
func (c *ProcessCluster) WaitTopology(n int) {
	c.t.Helper()
	var last string
	err := WaitFor(context.Background(), 50*time.Millisecond, testsupport.WithDeadline(clusterTopologyTimeout, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		views := map[string]*httpapi.MemberList{}
		for _, node := range c.Reachable() {
			ml, err := node.Members(ctx)
			if err != nil {
				last = fmt.Sprintf("%s: %v", node.id, err)
				return false, nil
			}
			if len(ml.Members) != n {
				last = fmt.Sprintf("%s sees %d members: %s", node.id, len(ml.Members), memberNames(ml))
				return false, nil
			}
			views[node.id] = ml
		}
		// Each node must see every reachable node as it is now: a node killed and restarted
		// a moment ago is a new member, and its old one may still be counted.
		for id, ml := range views {
			for other, oml := range views {
				if !hasMember(ml, oml.Self) {
					last = fmt.Sprintf("%s does not see %s as member %s yet: %s", id, other, oml.Self, memberNames(ml))
					return false, nil
				}
			}
		}
		return true, nil
	}))
	if err != nil {
		c.t.Fatalf("testkit: cluster topology did not reach %d members within %v (last: %s)", n, clusterTopologyTimeout, last)
	}
}

// Ledgers returns each reachable node's view of a run's ledger (GET
// /v1/executions/{runID}/ledger, which accepts a shared run id), keyed by node id. The nodes
// share one store, so the views differ only by what was committed between the reads. The
// caller owns the returned map.
func (c *ProcessCluster) Ledgers(ctx context.Context, runID string) (map[string]*httpapi.Ledger, error) {
	out := map[string]*httpapi.Ledger{}
	for _, n := range c.Reachable() {
		l, err := ledgerOf(ctx, n, runID)
		if err != nil {
			return nil, fmt.Errorf("testkit: ledger of %s on %s: %w", runID, n.id, err)
		}
		out[n.id] = l
	}
	return out, nil
}

// rejoinWait bounds how long Ledgers waits for a node that answers 503 while it rejoins the
// cluster under a new member id (a loaded machine can make a live node look lost).
const rejoinWait = 30 * time.Second

// ledgerOf reads a run's ledger from n, waiting while n answers 503 (rejoining).
func ledgerOf(ctx context.Context, n *ProcessNode, runID string) (*httpapi.Ledger, error) {
	ctx, cancel := context.WithTimeout(ctx, rejoinWait)
	defer cancel()
	var l *httpapi.Ledger
	err := WaitFor(ctx, 50*time.Millisecond, func() (bool, error) {
		var err error
		l, err = n.Client().Ledger(ctx, runID)
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status == http.StatusServiceUnavailable {
			return false, nil
		}
		return err == nil, err
	})
	return l, err
}

// Close kills every node still running (SIGKILL) and waits for them to exit, for callers that
// start several clusters in one test or benchmark. It is idempotent; t.Cleanup calls it too.
func (c *ProcessCluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.kill(); err != nil && !errors.Is(err, ErrNodeDown) {
				c.t.Logf("testkit: kill %s: %v", n.id, err)
			}
		}()
	}
	wg.Wait()
}

// cleanup kills every node still running and prints the logs of a failed test.
func (c *ProcessCluster) cleanup() {
	c.Close()
	if !c.t.Failed() {
		return
	}
	// DAIR_TEST_LOG_DIR keeps every failed cluster's full node logs for a post-mortem.
	dir := os.Getenv("DAIR_TEST_LOG_DIR")
	for _, n := range c.nodes {
		c.t.Logf("testkit: log of node %s (tail):\n%s", n.id, tail(n.Logs(), clusterLogTail))
		if dir == "" {
			continue
		}
		name := filepath.Join(dir, strings.ReplaceAll(c.t.Name(), "/", "_")+"-"+n.id+".log")
		if err := os.WriteFile(name, []byte(n.Logs()), 0o644); err != nil {
			c.t.Logf("testkit: keep log of %s: %v", n.id, err)
		} else {
			c.t.Logf("testkit: full log of node %s: %s", n.id, name)
		}
	}
}

// memberNames lists a member view as "node/member" pairs.
// hasMember reports whether ml lists member id.
func hasMember(ml *httpapi.MemberList, id string) bool {
	for _, m := range ml.Members {
		if m.ID == id {
			return true
		}
	}
	return false
}

func memberNames(ml *httpapi.MemberList) string {
	names := make([]string, 0, len(ml.Members))
	for _, m := range ml.Members {
		names = append(names, m.NodeID+"/"+m.ID)
	}
	return strings.Join(names, ",")
}

// freeLoopbackAddr returns 127.0.0.1:PORT with a TCP port that was free a moment ago.
func freeLoopbackAddr() (string, error) {
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// logBuffer is a goroutine-safe, append-only buffer for a child's output.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
