package localcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dairuntime/dair/internal/netaddr"
)

// Options configures Start. The zero value of each optional field means its default.
type Options struct {
	// Binary is the path of the dair binary the nodes run. Required.
	Binary string
	// N is the number of nodes. Default 3.
	N int
	// StoreURL is the shared store, redis://HOST:PORT/DB. Required.
	StoreURL string
	// Profile is every node's --cluster-profile. Default "local".
	Profile string
	// LogLevel is every node's --log-level. Default "warn".
	LogLevel string
	// LogDir holds each node's log (<id>.log) and data directory (<id>/). Required.
	LogDir string
	// ExtraArgs are appended to every node's command line.
	ExtraArgs []string
}

// Cluster is N `dair node` processes on one shared store, each joined to all the others and
// started with --fault-injection so Partition and Heal work. Close kills them.
type Cluster struct {
	nodes []*Node
}

// Start starts opts.N nodes concurrently and blocks until every one answers GET /readyz or
// ctx ends (it does not wait for the membership to converge: see WaitTopology). On error the
// nodes already started are killed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Binary == "" || opts.StoreURL == "" || opts.LogDir == "" {
		return nil, errors.New("localcluster: start: Binary, StoreURL and LogDir are required")
	}
	if opts.N <= 0 {
		opts.N = 3
	}
	if opts.Profile == "" {
		opts.Profile = "local"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	c := &Cluster{}
	for i := range opts.N {
		id := "n" + strconv.Itoa(i+1)
		bind, err := netaddr.FreeAddr()
		if err != nil {
			return nil, err
		}
		httpAddr, err := netaddr.FreeAddr()
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, &Node{id: id, bind: bind, http: httpAddr, bin: opts.Binary,
			logPath: filepath.Join(opts.LogDir, id+".log")})
	}
	for _, n := range c.nodes {
		n.args = nodeArgs(opts, n, c.nodes)
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// nodeArgs returns n's command line: every other node is a seed.
func nodeArgs(opts Options, n *Node, all []*Node) []string {
	args := []string{"node", "--store", opts.StoreURL, "--node-id", n.id, "--bind", n.bind, "--http", n.http,
		"--cluster-profile", opts.Profile, "--log-level", opts.LogLevel, "--fault-injection",
		"--data", filepath.Join(opts.LogDir, n.id)}
	var join []string
	for _, m := range all {
		if m != n {
			join = append(join, m.bind)
		}
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	return append(args, opts.ExtraArgs...)
}

// Node returns node i (0-based); it panics when i is out of range, like a slice index.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Nodes returns every node in start order. The caller owns the returned slice.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Reachable returns the nodes that run, are not stopped and not partitioned.
func (c *Cluster) Reachable() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.Reachable() {
			out = append(out, n)
		}
	}
	return out
}

// WaitTopology polls every reachable node's membership until each lists exactly want
// members, and blocks until then or ctx ends.
func (c *Cluster) WaitTopology(ctx context.Context, want int) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last string
	for {
		if last = c.topologyGap(ctx, want); last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: membership did not reach %d members: %w (last: %s)", want, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// topologyGap returns "" when every reachable node sees want members, else what differs.
func (c *Cluster) topologyGap(ctx context.Context, want int) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, n := range c.Reachable() {
		ml, err := n.Members(ctx)
		if err != nil {
			return err.Error()
		}
		if len(ml.Members) != want {
			return fmt.Sprintf("%s sees %d members", n.id, len(ml.Members))
		}
	}
	return ""
}

// Close kills every node still running and waits for them to exit. It is idempotent.
func (c *Cluster) Close() error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Kill(); err != nil && !errors.Is(err, ErrNotRunning) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
