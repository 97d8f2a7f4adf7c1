package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/step"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Errors returned by Run.
var (
	// ErrRunFailed is returned by Run when a run of the scenario did not succeed.
	ErrRunFailed = errors.New("demo: a run did not succeed")
	// ErrDiverged is returned by Run when the replay of a finished execution diverged.
	ErrDiverged = errors.New("demo: replay diverged")
	// ErrNoResume is returned by Run when a run interrupted by the crash did not resume with
	// the execution id it had before, or did not resume from its committed steps (a step
	// committed before the crash ran again or had its record replaced).
	ErrNoResume = errors.New("demo: run did not resume its execution")
	// ErrStalled is returned by Run when the scenario makes no progress within its deadline.
	ErrStalled = errors.New("demo: scenario stalled")
)

// Scenario timings.
const (
	nodeID        = "demo-node"
	chainKey      = "restart-chain"
	chainSteps    = 12
	chainStepTime = "150ms"
	// crashAfter is how many chain steps must have committed before the crash.
	crashAfter = 4
	// phaseTimeout bounds each wait of the scenario.
	phaseTimeout = 30 * time.Second
	// pollEvery is the ledger polling interval of the progress view.
	pollEvery = 25 * time.Millisecond
)

// Options configures Run.
type Options struct {
	// Out receives the demo's report. Default os.Stdout. Section headers are highlighted when
	// Out is a terminal and NO_COLOR is unset.
	Out io.Writer
	// DataDir holds the embedded store. Default "": a new temporary directory, removed when
	// Run returns unless Keep is set. A given DataDir is never removed.
	DataDir string
	// Keep keeps the temporary data directory and prints its path.
	Keep bool
	// Result, when not nil, receives the outcome of every run when Run returns (also on
	// failure: the runs summarized before it).
	Result *Result
}

// demo is the state of one scenario run. It is used by one goroutine.
type demo struct {
	p       *printer
	start   time.Time
	dbPath  string
	st      *boltstore.Store
	node    *actors.Node
	model   *standInModel
	modelAt string
	flakyAt string
	runs    []*tracked
	result  Result
	// calls counts every handler call, across both nodes; handlers is the counting registry
	// each node runs with.
	calls    *callCounter
	handlers *step.Registry
}

// Run plays the whole scenario (see the package documentation) and writes its report to
// opts.Out. It blocks until the scenario ends (about ten seconds) or ctx is done, and stops
// everything it started before it returns. It returns nil only when every run succeeded,
// every interrupted run resumed its execution from its committed steps (checked from the step
// records and the handler calls: none ran again) and the replay did not diverge; otherwise an
// error wrapping ErrRunFailed, ErrNoResume, ErrDiverged or ErrStalled, or the error that
// stopped the scenario. Run is safe to call from several goroutines at once, each call with
// its own data directory.
func Run(ctx context.Context, opts Options) (err error) {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	d := &demo{p: newPrinter(out), start: time.Now(), model: &standInModel{}, calls: &callCounter{calls: map[string]int{}}}
	if d.handlers, err = d.calls.registry(); err != nil {
		return err
	}
	dir := opts.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "dair-demo-")
		if err != nil {
			return fmt.Errorf("demo: create data dir: %w", err)
		}
		dir = tmp
		defer func() {
			if opts.Keep {
				d.p.printf("data kept in %s\n", dir)
				err = errors.Join(err, d.p.err)
				return
			}
			err = errors.Join(err, os.RemoveAll(dir))
		}()
	}
	d.dbPath = filepath.Join(dir, "dair.db")

	modelSrv, err := startLocal(d.model)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, modelSrv.close()) }()
	flakySrv, err := startLocal(&flakyEndpoint{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, flakySrv.close()) }()
	d.modelAt, d.flakyAt = modelSrv.url, flakySrv.url
	defer func() { err = errors.Join(err, d.shutdown()) }()

	err = d.play(ctx)
	err = errors.Join(err, d.p.err)
	if opts.Result != nil {
		*opts.Result = d.result
		opts.Result.OK = err == nil
		if err != nil {
			opts.Result.Error = err.Error()
		}
	}
	return err
}

// play runs the scenario's sections in order.
func (d *demo) play(ctx context.Context) error {
	d.p.title("dair demo: durable multi-tenant pipelines on the embedded store")
	d.p.printf("data        %s\n", d.dbPath)
	d.p.printf("model       stand-in OpenAI-compatible server at %s (offline, deterministic; no API key used)\n", d.modelAt)
	d.p.printf("flaky api   %s (answers 503 to the first call of each step, then 200)\n", d.flakyAt)

	if err := d.setup(ctx); err != nil {
		return err
	}
	if err := d.tenantRuns(ctx); err != nil {
		return err
	}
	if err := d.placement(ctx); err != nil {
		return err
	}
	resumeErr := d.crashAndRestart(ctx)
	if resumeErr != nil && !errors.Is(resumeErr, ErrNoResume) {
		return resumeErr
	}
	replayErr := d.replay(ctx)
	if replayErr != nil && !errors.Is(replayErr, ErrDiverged) {
		return errors.Join(resumeErr, replayErr)
	}
	sumErr := d.summary(ctx)
	return errors.Join(resumeErr, replayErr, sumErr)
}

// startNode opens the store and starts a node on it with fast demo timings.
func (d *demo) startNode(ctx context.Context) error {
	// actors.Start given an already-done ctx leaks its pump and recovery tickers; do not ask.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("demo: start node: %w", err)
	}
	st, err := boltstore.Open(boltstore.Options{Path: d.dbPath})
	if err != nil {
		return fmt.Errorf("demo: open store: %w", err)
	}
	n, err := actors.Start(ctx, actors.Config{NodeID: nodeID, Store: st, Handlers: d.handlers, PumpInterval: 10 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, RecoveryInterval: 200 * time.Millisecond,
		QueueVisibility: 2 * time.Second})
	if err != nil {
		return errors.Join(fmt.Errorf("demo: start node: %w", err), st.Close())
	}
	d.st, d.node = st, n
	return nil
}

// shutdown stops the node and closes the store, if they are up.
func (d *demo) shutdown() error {
	var err error
	if d.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if serr := d.node.Stop(ctx); serr != nil {
			err = fmt.Errorf("demo: stop node: %w", serr)
		}
		d.node = nil
	}
	if d.st != nil {
		if cerr := d.st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("demo: close store: %w", cerr))
		}
		d.st = nil
	}
	return err
}

// setup starts the node, creates the seed tenants and loads the pipelines.
func (d *demo) setup(ctx context.Context) error {
	d.p.section("1. Node, tenants and pipelines")
	if err := d.startNode(ctx); err != nil {
		return err
	}
	d.p.printf("node %s started in process (incarnation %s): control plane + runtime, bbolt store\n\n",
		d.node.ID(), d.node.Incarnation())

	tw := d.p.table()
	d.p.row(tw, "TENANT", "ISOLATION", "INSTANCE PREFIX", "PREFER DEDICATED", "SHARED FALLBACK", "MAX INSTANCES", "RUNS/INSTANCE")
	for _, t := range tenancy.SeedTenants() {
		nt, err := d.node.PutTenant(ctx, t)
		if err != nil {
			return fmt.Errorf("demo: put tenant %s: %w", t.TenantId, err)
		}
		d.p.row(tw, nt.TenantId, nt.IsolationMode, nt.RuntimeInstanceIdPrefix, yesNo(nt.PreferDedicatedCapacity),
			yesNo(nt.AllowSharedFallback), fmt.Sprint(nt.MaxRuntimeInstances), fmt.Sprint(nt.MaxConcurrentRunsPerInstance))
	}
	d.p.flush(tw)
	d.p.printf("\n")

	files, err := examplePipelines()
	if err != nil {
		return err
	}
	files = append(files, namedFile{name: "(demo) " + chainKey, data: chainPipeline(chainKey, chainSteps, chainStepTime)})
	tw = d.p.table()
	d.p.row(tw, "PIPELINE", "STEPS", "HASH", "SOURCE")
	for _, f := range files {
		pl, err := d.node.PutPipeline(ctx, f.data)
		if err != nil {
			return fmt.Errorf("demo: load pipeline %s: %w", f.name, err)
		}
		d.p.row(tw, pl.Key, fmt.Sprint(len(pl.Steps)), short(pl.Hash, 12), f.name)
	}
	d.p.flush(tw)
	return nil
}

// submit submits one run and starts tracking it.
func (d *demo) submit(ctx context.Context, tenant, pipeline string, input map[string]any) (*tracked, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("demo: encode input: %w", err)
	}
	run, err := d.node.Submit(ctx, actors.SubmitRequest{Pipeline: pipeline, Input: raw,
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: tenant, Source: "dair-demo", RequestedBy: "demo",
			Roles: []string{messages.RoleTenant}}})
	if err != nil {
		return nil, fmt.Errorf("demo: submit %s for %s: %w", pipeline, tenant, err)
	}
	pl, err := d.node.GetPipeline(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("demo: get pipeline %s: %w", pipeline, err)
	}
	t := &tracked{id: run.SharedRunId, tenant: tenant, pipeline: pipeline, total: len(pl.Steps), status: run.Status}
	d.runs = append(d.runs, t)
	d.p.printf("  submitted %-10s %-16s as %s\n", tenant, pipeline, t.id)
	return t, nil
}

// tenantRuns submits one batch of runs per tenant and follows them to the end.
func (d *demo) tenantRuns(ctx context.Context) error {
	d.p.section("2. Runs for three tenants (live progress from the ledger)")
	batch := []struct {
		tenant, pipeline string
		input            map[string]any
	}{
		{"tenant-a", "research-fanout", map[string]any{"topic": "durable execution for AI agents", "llm_base_url": d.modelAt}},
		{"tenant-b", "hello", map[string]any{"name": "tenant-b"}},
		{"tenant-b", "http-retry", map[string]any{"url": d.flakyAt + "/quote"}},
		{"default", "hello", map[string]any{"name": "everyone"}},
	}
	var runs []*tracked
	for _, b := range batch {
		t, err := d.submit(ctx, b.tenant, b.pipeline, b.input)
		if err != nil {
			return err
		}
		runs = append(runs, t)
	}
	d.p.printf("\n")
	if err := d.follow(ctx, runs, allTerminal(runs)); err != nil {
		return err
	}
	d.p.printf("\nthe stand-in model served %d chat completions\n", d.model.callCount())
	return nil
}
