package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

// AgentOptions configures a node's agent messaging (seed 003). The zero value means no
// built-in agent type, no subscription and the seed's health defaults.
type AgentOptions struct {
	// Types are the built-in agent types the node owns (`--agents`): echo and counter. Default
	// none (the node still routes sends and publishes to the other nodes' agents).
	Types []string
	// Subscriptions are subscriptions the node owns (`--agent-subscription`), each
	// "TENANT:TOPIC=TYPE[/KEY]": publishes of TENANT to topic type TOPIC (a prefix when it ends
	// with '*') go to agent TYPE/KEY, or TYPE/<topic source> without KEY. They are made at start
	// and go away with the node. Default none.
	Subscriptions []string
	// HealthInterval, FailureThreshold and RPCTimeout are the health knobs of agents.Config
	// (`--agent-health-interval`, `--agent-failure-threshold`, `--agent-rpc-timeout`). Zero
	// means the seed's defaults: 5s, 2 and 30s.
	HealthInterval   time.Duration
	FailureThreshold int
	RPCTimeout       time.Duration
}

// validate checks the types, the subscriptions and the knobs.
func (a AgentOptions) validate() error {
	for _, t := range a.Types {
		if t != actors.AgentEcho && t != actors.AgentCounter {
			return fmt.Errorf("unknown built-in agent type %q (want %s or %s)", t, actors.AgentEcho, actors.AgentCounter)
		}
	}
	if _, err := ParseAgentSubscriptions(a.Subscriptions); err != nil {
		return err
	}
	if err := a.config().Validate(); err != nil {
		return fmt.Errorf("agent options: %w", err)
	}
	return nil
}

// config returns the agents.Config of the knobs.
func (a AgentOptions) config() agents.Config {
	return agents.Config{HealthInterval: a.HealthInterval, FailureThreshold: a.FailureThreshold, RPCTimeout: a.RPCTimeout}
}

// configure sets the agent fields of a node's configuration.
func (a AgentOptions) configure(cfg *actors.Config) {
	cfg.AgentTypes = a.Types
	cfg.Agents = a.config()
}

// subscribe makes the configured subscriptions on node. It blocks until the routers know them
// or ctx ends.
func (a AgentOptions) subscribe(ctx context.Context, node *actors.Node) error {
	subs, err := ParseAgentSubscriptions(a.Subscriptions)
	if err != nil || len(subs) == 0 {
		return err
	}
	if _, err := node.Subscribe(ctx, subs...); err != nil {
		return fmt.Errorf("server: agent subscriptions: %w", err)
	}
	return nil
}

// ParseAgentSubscriptions reads "TENANT:TOPIC=TYPE[/KEY]" specs (see
// AgentOptions.Subscriptions). The tenant ends at the first ':', the topic at the last '=',
// the type at the first '/'.
func ParseAgentSubscriptions(specs []string) ([]*messages.Subscription, error) {
	out := make([]*messages.Subscription, 0, len(specs))
	for _, spec := range specs {
		tenant, rest, ok1 := strings.Cut(spec, ":")
		i := strings.LastIndex(rest, "=")
		if !ok1 || i < 0 {
			return nil, fmt.Errorf("agent subscription %q: want TENANT:TOPIC=TYPE[/KEY] (TOPIC ending in * for a prefix)", spec)
		}
		topic, target := rest[:i], rest[i+1:]
		typ, key, _ := strings.Cut(target, "/")
		s := &messages.Subscription{TenantId: tenant, AgentType: typ, AgentKey: key}
		p, isPrefix := strings.CutSuffix(topic, "*")
		switch {
		case isPrefix && p == "":
			return nil, fmt.Errorf("agent subscription %q: a topic prefix needs at least one character before the * (a subscription to every topic is not supported)", spec)
		case topic == "":
			return nil, fmt.Errorf("agent subscription %q: no topic before the =", spec)
		case isPrefix:
			s.TopicPrefix = p
		default:
			s.Topic = topic
		}
		if err := agents.ValidateSubscription(s); err != nil {
			return nil, fmt.Errorf("agent subscription %q: %w", spec, err)
		}
		out = append(out, s)
	}
	return out, nil
}
