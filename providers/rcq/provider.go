package rcq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/remote"
)

// Name is the provider name and the transport name of the Redis command queue.
const Name = "redis-command-queue"

// MetadataQueueKey is the descriptor metadata key of an instance's command stream.
const MetadataQueueKey = "provider.commandQueueKey"

// Group is the consumer group of every command stream.
const Group = "runtime"

// fieldCommand is the stream entry field holding the encoded RuntimeCommand.
const fieldCommand = "c"

// streamMaxLen caps a command stream (approximately); consumed entries are deleted anyway.
const streamMaxLen = 10000

// StreamKey returns the command stream of runtime instance id.
func StreamKey(id string) string { return "dair:runtime:" + id + ":commands" }

// replyKey returns the reply list of a command.
func replyKey(commandID string) string { return "dair:runtime:reply:" + commandID }

// Config configures the provider.
type Config struct {
	// Client reaches the Redis of the command streams. Required. The provider does not close
	// it. Give it a pool large enough for the concurrent calls: each waits on its own
	// connection (BLPOP).
	Client redis.UniversalClient
	// Remote is the hardening; its Prefix is set to "redis-command-queue".
	Remote remote.Config
	// ScaleOut, Lookup and ReadyTimeout make the provider a scale-out provider (see
	// remote.ClientConfig).
	ScaleOut     providers.ScaleOuter
	Lookup       func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)
	ReadyTimeout time.Duration
}

// Provider is the "redis-command-queue" provider. All methods are goroutine-safe.
type Provider struct {
	*remote.Client
}

var (
	_ providers.Dispatcher   = (*Provider)(nil)
	_ providers.StatusReader = (*Provider)(nil)
	_ providers.Controller   = (*Provider)(nil)
	_ providers.ScaleOuter   = (*Provider)(nil)
	_ remote.Transport       = (*transport)(nil)
)

// New returns the provider; a nil Client panics (a wiring bug).
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		panic("rcq: Config.Client is required")
	}
	cfg.Remote.Prefix = Name
	c := remote.NewClient(remote.ClientConfig{Name: Name, Transport: &transport{rdb: cfg.Client}, Caller: remote.NewCaller(cfg.Remote),
		ScaleOut: cfg.ScaleOut, Lookup: cfg.Lookup, ReadyTimeout: cfg.ReadyTimeout})
	return &Provider{Client: c}
}

// transport appends commands to streams and waits for their replies.
type transport struct{ rdb redis.UniversalClient }

// Endpoint returns d's command stream: Metadata[provider.commandQueueKey], else Endpoint.
func (t *transport) Endpoint(d *messages.CapacityDescriptor) (string, error) {
	if k := d.GetMetadata()[MetadataQueueKey]; k != "" {
		return k, nil
	}
	if k := d.GetEndpoint(); k != "" {
		return k, nil
	}
	return "", remote.ErrNoEndpoint
}

// Send appends cmd to the stream and waits for its reply until ctx ends.
func (t *transport) Send(ctx context.Context, stream string, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, error) {
	reply := replyKey(cmd.GetCommandId())
	cmd.ReplyTo = reply
	b, err := proto.Marshal(cmd)
	if err != nil {
		return nil, remote.Fail(remote.ClassException, fmt.Errorf("rcq: encode command: %w", err))
	}
	if err := t.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, MaxLen: streamMaxLen, Approx: true,
		Values: []any{fieldCommand, b}}).Err(); err != nil {
		return nil, remote.Classify(err)
	}
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if wait < time.Millisecond {
		return nil, remote.Fail(remote.ClassTimeout, context.DeadlineExceeded)
	}
	// BLPOP takes whole seconds (go-redis truncates: 1.9 s would wait 1 s and time out early,
	// before a consumer that is just starting answers): ask for the next whole second and let
	// ctx's deadline end the wait.
	res, err := t.rdb.BLPop(ctx, wait.Truncate(time.Second)+time.Second, reply).Result()
	if err != nil && ctx.Err() != nil {
		return nil, remote.Fail(remote.ClassTimeout, fmt.Errorf("rcq: no reply on %s within %s: %w", reply, wait, ctx.Err()))
	}
	switch {
	case errors.Is(err, redis.Nil):
		return nil, remote.Fail(remote.ClassTimeout, fmt.Errorf("rcq: no reply on %s within %s", reply, wait))
	case err != nil:
		return nil, remote.Classify(err)
	case len(res) != 2:
		return nil, remote.Fail(remote.ClassInvalidResponse, fmt.Errorf("rcq: reply of %d fields", len(res)))
	}
	out := &messages.RuntimeCommandResult{}
	if err := proto.Unmarshal([]byte(res[1]), out); err != nil {
		return nil, remote.Fail(remote.ClassInvalidResponse, fmt.Errorf("rcq: decode reply: %w", err))
	}
	return out, nil
}

// WithScaleOut returns a provider sharing p's connections and circuits whose scale-out goes
// through s (the host manager's provider); each new instance is proven ready through this
// transport (a status call) before the scale-out succeeds.
func (p *Provider) WithScaleOut(s providers.ScaleOuter, lookup func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)) *Provider {
	q := *p
	q.Client = p.Client.WithScaleOut(s, lookup)
	return &q
}
