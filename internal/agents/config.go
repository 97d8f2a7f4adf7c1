package agents

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of the agents package.
var (
	// ErrInvalidConfig is returned by Config.Validate when a field is out of range.
	ErrInvalidConfig = errors.New("agents: invalid config")
	// ErrInvalidAgentID is returned by ValidateAgentID when a type or key is malformed.
	ErrInvalidAgentID = errors.New("agents: invalid agent id")
	// ErrInvalidTopic is returned by ValidateTopic when a topic type is malformed.
	ErrInvalidTopic = errors.New("agents: invalid topic")
	// ErrInvalidSubscription is returned by ValidateSubscription when a subscription is malformed.
	ErrInvalidSubscription = errors.New("agents: invalid subscription")
	// ErrInvalidTenant is returned by ValidateTenant for a tenant id no tenant can have.
	ErrInvalidTenant = errors.New("agents: invalid tenant")
	// ErrNoTenant is returned by ValidateEnvelope when the envelope has no snapshot tenant.
	ErrNoTenant = errors.New("agents: message has no tenant")
	// ErrSessionID is returned by Sessions.OpenID for an id outside CallerSessions or in use.
	ErrSessionID = errors.New("agents: invalid session id")
)

// Defaults of Config, as seed 003 names them.
const (
	DefaultHealthInterval   = 5 * time.Second
	DefaultFailureThreshold = 2
	DefaultRPCTimeout       = 30 * time.Second
	DefaultIdleTimeout      = time.Minute
	DefaultMaxBatch         = 256
	DefaultMaxBatchBytes    = 1 << 20
)

// Config holds the agent runtime's knobs. The zero value of each field means its default.
type Config struct {
	// HealthInterval is how often a router probes every worker it knows (seed:
	// health_check_interval_seconds). A probe that is not answered within the interval (or
	// RPCTimeout, if shorter) fails. Default 5s.
	HealthInterval time.Duration
	// FailureThreshold is how many consecutive failed probes evict a worker (seed:
	// health_check_failure_threshold). Default 2.
	FailureThreshold int
	// RPCTimeout bounds every request a router sends a worker; one that exceeds it marks the
	// worker unhealthy (seed: rpc_timeout_seconds). It is also the deadline of a send that gives
	// none. Default 30s.
	RPCTimeout time.Duration
	// IdleTimeout passivates an agent that received nothing for about this long (between one and
	// two times it). Default 1m.
	IdleTimeout time.Duration
	// MaxBatch bounds the deliveries of one request from a router to a worker. Default 256.
	MaxBatch int
	// MaxBatchBytes bounds the payload bytes of one request from a router to a worker, and of
	// one response: a batch goes out once its payloads reach it (a larger payload goes alone).
	// Default 1 MiB.
	MaxBatchBytes int
}

// DefaultConfig returns the seed's defaults.
func DefaultConfig() Config {
	return Config{HealthInterval: DefaultHealthInterval, FailureThreshold: DefaultFailureThreshold,
		RPCTimeout: DefaultRPCTimeout, IdleTimeout: DefaultIdleTimeout, MaxBatch: DefaultMaxBatch, MaxBatchBytes: DefaultMaxBatchBytes}
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.HealthInterval == 0 {
		c.HealthInterval = d.HealthInterval
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = d.FailureThreshold
	}
	if c.RPCTimeout == 0 {
		c.RPCTimeout = d.RPCTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = d.MaxBatch
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = d.MaxBatchBytes
	}
	return c
}

// Validate reports the first negative field of c, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.HealthInterval < 0:
		return fmt.Errorf("%w: HealthInterval %v is negative", ErrInvalidConfig, c.HealthInterval)
	case c.FailureThreshold < 0:
		return fmt.Errorf("%w: FailureThreshold %d is negative", ErrInvalidConfig, c.FailureThreshold)
	case c.RPCTimeout < 0:
		return fmt.Errorf("%w: RPCTimeout %v is negative", ErrInvalidConfig, c.RPCTimeout)
	case c.IdleTimeout < 0:
		return fmt.Errorf("%w: IdleTimeout %v is negative", ErrInvalidConfig, c.IdleTimeout)
	case c.MaxBatch < 0:
		return fmt.Errorf("%w: MaxBatch %d is negative", ErrInvalidConfig, c.MaxBatch)
	case c.MaxBatchBytes < 0:
		return fmt.Errorf("%w: MaxBatchBytes %d is negative", ErrInvalidConfig, c.MaxBatchBytes)
	}
	return nil
}

// ProbeTimeout is how long a router waits for one health probe: the smaller of HealthInterval
// and RPCTimeout (after defaults).
func (c Config) ProbeTimeout() time.Duration {
	c = c.WithDefaults()
	return min(c.HealthInterval, c.RPCTimeout)
}

// EvictionBound is the longest a silent worker stays in the directory when probes are its only
// signal (after defaults): the wait for the next probe round, FailureThreshold rounds, and the
// last probe's timeout.
func (c Config) EvictionBound() time.Duration {
	c = c.WithDefaults()
	return time.Duration(c.FailureThreshold+1)*c.HealthInterval + c.ProbeTimeout()
}
