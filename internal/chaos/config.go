package chaos

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Sentinel errors of package chaos.
var (
	// ErrBadConfig is wrapped by the errors of Config.Validate, ParseFaults and NewSchedule:
	// the invocation is wrong, not the cluster.
	ErrBadConfig = errors.New("chaos: bad configuration")
	// ErrHarness is wrapped by Run's error when the harness itself could not do its job
	// (start Redis or the nodes, inject a fault, read the evidence): no verdict was reached.
	ErrHarness = errors.New("chaos: harness failure")
)

// Limits of Config.
const (
	maxNodes = 9
	maxRuns  = 4000 // the run lists the harness polls answer up to 1000 runs per tenant
)

// Config configures Run. The zero value of each field means its default (DefaultConfig).
type Config struct {
	// Nodes is the number of `dair node` processes. Default 3.
	Nodes int
	// Runs is the number of runs submitted over the fault window. Default 300.
	Runs int
	// Faults are the kinds injected. Default every kind (without redis-restart when StoreURL
	// is set: the harness can only restart a Redis it started).
	Faults []Fault
	// Duration is the fault window; runs are submitted over its first 80%. Default 2m.
	Duration time.Duration
	// Seed fixes the fault schedule and the workload's choices. 0 means a seed drawn from the
	// clock (printed, so the run can be repeated).
	Seed int64
	// StoreURL targets an existing Redis (redis://HOST:PORT/DB). Default: a private
	// redis-server on a free loopback port, with appendfsync always.
	StoreURL string
	// Binary is the dair binary the nodes run. Default: this process's executable.
	Binary string
	// Profile is the nodes' --cluster-profile. Default "local".
	Profile string
	// FinishTimeout bounds the wait, after the fault window, for every acknowledged run to
	// finish (a run still unfinished then fails the runs_finished property). Default 3m.
	FinishTimeout time.Duration
	// SettleTimeout bounds the wait for usage and reservations to settle once every run has
	// finished (they are written asynchronously; a hold lapses after its 30 s TTL). Default 45s.
	SettleTimeout time.Duration
	// LogDir keeps the node and Redis logs; default a temporary directory, removed when every
	// property held and Keep is false.
	LogDir string
	// Keep keeps the temporary log directory even when every property held.
	Keep bool
	// Progress receives a line per fault and a periodic summary. Default io.Discard.
	Progress io.Writer
	// ProgressEvery is the period of the summary line. Default 10s.
	ProgressEvery time.Duration
}

// DefaultConfig returns the configuration of `dair chaos` without flags.
func DefaultConfig() Config {
	return Config{Nodes: 3, Runs: 300, Faults: append([]Fault(nil), AllFaults...), Duration: 2 * time.Minute,
		Profile: "local", FinishTimeout: 3 * time.Minute, SettleTimeout: 45 * time.Second,
		Progress: io.Discard, ProgressEvery: 10 * time.Second}
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Runs == 0 {
		c.Runs = d.Runs
	}
	if c.Faults == nil {
		for _, f := range d.Faults {
			if f != FaultRedisRestart || c.StoreURL == "" {
				c.Faults = append(c.Faults, f)
			}
		}
	}
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.Profile == "" {
		c.Profile = d.Profile
	}
	if c.FinishTimeout == 0 {
		c.FinishTimeout = d.FinishTimeout
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = d.SettleTimeout
	}
	if c.Progress == nil {
		c.Progress = d.Progress
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = d.ProgressEvery
	}
	return c
}

// Validate reports the first invalid field (after defaults) as an error wrapping ErrBadConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Nodes < 1 || c.Nodes > maxNodes:
		return fmt.Errorf("%w: --nodes %d is not in [1, %d]", ErrBadConfig, c.Nodes, maxNodes)
	case c.Runs < 1 || c.Runs > maxRuns:
		return fmt.Errorf("%w: --runs %d is not in [1, %d]", ErrBadConfig, c.Runs, maxRuns)
	case c.Duration < 0:
		return fmt.Errorf("%w: --duration %s is negative", ErrBadConfig, c.Duration)
	case c.FinishTimeout < 0 || c.SettleTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrBadConfig)
	case c.StoreURL != "" && !strings.HasPrefix(c.StoreURL, "redis://"):
		return fmt.Errorf("%w: --store %q is not redis://HOST:PORT/DB (a cluster needs Redis)", ErrBadConfig, c.StoreURL)
	case c.Profile != "local" && c.Profile != "lan":
		return fmt.Errorf("%w: cluster profile %q is not local or lan", ErrBadConfig, c.Profile)
	}
	for _, f := range c.Faults {
		if f == FaultRedisRestart && c.StoreURL != "" {
			return fmt.Errorf("%w: redis-restart needs the private redis-server (drop --store, or the fault)", ErrBadConfig)
		}
		if _, ok := faultNames[f]; !ok {
			return fmt.Errorf("%w: unknown %s", ErrBadConfig, f)
		}
	}
	if _, err := NewSchedule(c.Seed, c.Faults, c.Nodes, c.Duration); err != nil {
		return err
	}
	return nil
}
