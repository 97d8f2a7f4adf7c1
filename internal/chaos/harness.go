package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/internal/localcluster"
	"github.com/dairuntime/dair/internal/store/redisstore"
)

// Harness timeouts: generous, because they bound waiting on a loaded machine, not a property.
const (
	startTimeout   = 2 * time.Minute  // Redis and every node ready, membership converged
	restartTimeout = 90 * time.Second // a killed node or Redis back
	callTimeout    = 10 * time.Second // one API call
	pollEvery      = time.Second      // the poller's period
)

// harness is one chaos run in progress: the processes it started, the counting server, the
// store it reads evidence from and the tracker the workload fills.
type harness struct {
	cfg      Config
	sched    Schedule
	work     *workload
	out      *lineWriter
	logDir   string
	redis    *localcluster.Redis // nil with Config.StoreURL
	storeURL string
	cluster  *localcluster.Cluster
	counter  *counter
	store    *redisstore.Store
	track    *tracker
	next     atomic.Uint64 // round-robin cursor over reachable nodes

	pidMu    sync.Mutex     // guards pidNodes
	pidNodes map[int]string // every node process seen: pid → node id
}

// Run starts the cluster (and Redis), runs the workload while it injects the scheduled faults,
// waits for every acknowledged run to finish, checks the properties and returns the report.
// It blocks for about Duration plus the time the runs take to finish and settle. The error
// wraps ErrBadConfig for a bad cfg and ErrHarness when the harness could not reach a verdict
// (the report is then nil); a report whose properties failed is not an error: see
// Report.Passed. Cancelling ctx stops the run and kills every process it started.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()%1_000_000 + 1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sched, err := NewSchedule(cfg.Seed, cfg.Faults, cfg.Nodes, cfg.Duration)
	if err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, sched: sched, out: &lineWriter{w: cfg.Progress}, track: newTracker(), pidNodes: map[int]string{}}
	rep, err := h.run(ctx)
	if cerr := h.close(rep); cerr != nil {
		h.out.printf("chaos: cleanup: %v", cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHarness, err)
	}
	return rep, nil
}

// run is Run after the configuration checks.
func (h *harness) run(ctx context.Context) (*Report, error) {
	if err := h.start(ctx); err != nil {
		return nil, err
	}
	h.out.printf("%s", strings.TrimRight(h.sched.String(), "\n"))
	start := time.Now()
	drive, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.poll(drive, start) }()
	go func() { defer wg.Done(); h.submit(drive, start) }()
	faults := h.inject(ctx, start)
	waitErr := h.finish(ctx)
	stop()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if waitErr != nil {
		h.out.printf("chaos: %v", waitErr)
	}
	ev, ledgers, err := h.collect(ctx, faults)
	if err != nil {
		return nil, err
	}
	return h.report(start, ev, ledgers, faults), nil
}

// start launches Redis (unless targeting --store), the counting server and the nodes, waits
// for the membership, opens the store and puts the workload's tenants and pipeline.
func (h *harness) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	dir, err := h.logDirectory()
	if err != nil {
		return err
	}
	h.logDir = dir
	h.out.printf("chaos: seed %d; logs in %s", h.cfg.Seed, dir)
	h.storeURL = h.cfg.StoreURL
	if h.storeURL == "" {
		if h.redis, err = localcluster.StartRedis(ctx, localcluster.RedisOptions{Dir: dir}); err != nil {
			return err
		}
		h.storeURL = h.redis.URL()
	}
	if h.counter, err = startCounter(h.nodePIDs); err != nil {
		return err
	}
	bin := h.cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("find the dair binary: %w", err)
		}
	}
	h.cluster, err = localcluster.Start(ctx, localcluster.Options{Binary: bin, N: h.cfg.Nodes, StoreURL: h.storeURL,
		Profile: h.cfg.Profile, LogDir: dir})
	if err != nil {
		return err
	}
	if err := h.cluster.WaitTopology(ctx, h.cfg.Nodes); err != nil {
		return err
	}
	if h.store, err = redisstore.Open(ctx, redisstore.Options{URL: h.storeURL}); err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	h.work = newWorkload(fmt.Sprintf("chaos-%d-%d", h.cfg.Seed, time.Now().Unix()%100_000), h.counter.url)
	if err := h.work.setup(ctx, h.cluster.Node(0).Client()); err != nil {
		return err
	}
	h.out.printf("chaos: %d nodes up on %s; %d runs of %s over %s for tenants %v", h.cfg.Nodes, h.storeURL,
		h.cfg.Runs, h.work.pipeline, h.cfg.Duration, h.work.tenantIDs())
	return nil
}

// logDirectory returns Config.LogDir (created) or a new temporary directory.
func (h *harness) logDirectory() (string, error) {
	if h.cfg.LogDir != "" {
		if err := os.MkdirAll(h.cfg.LogDir, 0o755); err != nil {
			return "", fmt.Errorf("create log directory: %w", err)
		}
		return h.cfg.LogDir, nil
	}
	dir, err := os.MkdirTemp("", "dair-chaos-")
	if err != nil {
		return "", fmt.Errorf("create log directory: %w", err)
	}
	return dir, nil
}

// close stops everything the harness started, and removes a temporary log directory when the
// run passed and Keep is off. rep is nil when no verdict was reached.
func (h *harness) close(rep *Report) error {
	var errs []error
	if h.cluster != nil {
		errs = append(errs, h.cluster.Close())
	}
	if h.store != nil {
		errs = append(errs, h.store.Close())
	}
	if h.redis != nil {
		errs = append(errs, h.redis.Close())
	}
	if h.counter != nil {
		errs = append(errs, h.counter.close())
	}
	if h.logDir != "" && h.cfg.LogDir == "" && !h.cfg.Keep && rep != nil && rep.Passed {
		errs = append(errs, os.RemoveAll(h.logDir))
	} else if h.logDir != "" && rep != nil {
		rep.LogDir = h.logDir
	}
	return errors.Join(errs...)
}

// nodePIDs returns the pids of the running node processes and remembers which node each is.
func (h *harness) nodePIDs() []int {
	if h.cluster == nil {
		return nil
	}
	var pids []int
	h.pidMu.Lock()
	defer h.pidMu.Unlock()
	for _, n := range h.cluster.Nodes() {
		if pid := n.PID(); pid != 0 {
			pids = append(pids, pid)
			h.pidNodes[pid] = n.ID()
		}
	}
	return pids
}

// pidNames returns a copy of the pid → node id map.
func (h *harness) pidNames() map[int]string {
	h.nodePIDs()
	h.pidMu.Lock()
	defer h.pidMu.Unlock()
	return maps.Clone(h.pidNodes)
}

// client returns a client of a reachable node, taking turns; node 0's when none is.
func (h *harness) client() *client.Client {
	nodes := h.cluster.Reachable()
	if len(nodes) == 0 {
		return h.cluster.Node(0).Client()
	}
	return nodes[int(h.next.Add(1)%uint64(len(nodes)))].Client()
}

// lineWriter serialises progress lines from the harness's goroutines.
type lineWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lineWriter) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Progress is best effort: a closed or full output must not stop the run.
	if _, err := fmt.Fprintf(l.w, format+"\n", a...); err != nil {
		return
	}
}
