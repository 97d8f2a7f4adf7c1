package rcq

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/remote"
)

// Defaults of ConsumerConfig's zero fields.
const (
	DefaultBlock       = time.Second
	DefaultReclaimIdle = 5 * time.Second
	DefaultBatch       = 64
	replyTTL           = time.Minute
	noStreamsPoll      = 50 * time.Millisecond // instance poll while no instance is served
)

// ConsumerConfig configures a Consumer. The zero value of each tunable means its default.
type ConsumerConfig struct {
	// Client reaches the Redis of the command streams. Required; not closed by the consumer.
	Client redis.UniversalClient
	// Backend carries the commands out. Required.
	Backend remote.Backend
	// Instances lists the instances whose streams are consumed (read at every poll). Required.
	Instances remote.Instances
	// Name is this consumer's name in the group (unique per process incarnation). Required.
	Name string
	// Block is how long one read waits for commands. Default 1s.
	Block time.Duration
	// ReclaimIdle is how long a read entry may stay unacknowledged before another consumer
	// reclaims it (its reader is presumed dead). Default 5s.
	ReclaimIdle time.Duration
	// Batch bounds the entries of one read and the commands carried out at once. Default 64.
	Batch int
	// Logger receives warnings. Default: none.
	Logger *zap.Logger
}

// Consumer consumes the command streams of a runtime host's instances. Run drives it; it is
// not otherwise used concurrently.
type Consumer struct {
	cfg    ConsumerConfig
	groups map[string]bool // streams whose group exists (touched only by Run's goroutine)
	sem    chan struct{}
	wg     sync.WaitGroup // commands in flight
}

// NewConsumer returns a consumer; a config missing a required field panics (a wiring bug).
func NewConsumer(cfg ConsumerConfig) *Consumer {
	if cfg.Client == nil || cfg.Backend == nil || cfg.Instances == nil || cfg.Name == "" {
		panic("rcq: consumer config: Client, Backend, Instances and Name are required")
	}
	if cfg.Block <= 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.ReclaimIdle <= 0 {
		cfg.ReclaimIdle = DefaultReclaimIdle
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Consumer{cfg: cfg, groups: map[string]bool{}, sem: make(chan struct{}, cfg.Batch)}
}

// Run consumes until ctx ends, then waits for the commands in flight. It reclaims the entries
// of dead consumers every ReclaimIdle/2.
func (c *Consumer) Run(ctx context.Context) {
	defer c.wg.Wait()
	lastReclaim := time.Time{}
	for ctx.Err() == nil {
		streams := c.streams(ctx)
		if len(streams) == 0 {
			// Poll quickly: a host's instance appears right after it starts, and commands
			// may already wait in its stream (dispatches race the first read).
			if !sleep(ctx, min(c.cfg.Block, noStreamsPoll)) {
				return
			}
			continue
		}
		if time.Since(lastReclaim) >= c.cfg.ReclaimIdle/2 {
			lastReclaim = time.Now()
			c.reclaim(ctx, streams)
		}
		args := make([]string, 0, 2*len(streams))
		args = append(args, streams...)
		for range streams {
			args = append(args, ">")
		}
		res, err := c.cfg.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: c.cfg.Name, Streams: args,
			Count: int64(c.cfg.Batch), Block: c.cfg.Block}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				c.groups = map[string]bool{} // a stream was deleted (Redis restarted): create again
			}
			c.cfg.Logger.Warn("rcq: read commands", zap.Error(err))
			if !sleep(ctx, 100*time.Millisecond) {
				return
			}
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				c.handle(ctx, s.Stream, m)
			}
		}
	}
}

// streams returns the command streams of the current instances, creating missing groups.
func (c *Consumer) streams(ctx context.Context) []string {
	var out []string
	for _, id := range c.cfg.Instances() {
		key := StreamKey(id)
		if !c.groups[key] {
			err := c.cfg.Client.XGroupCreateMkStream(ctx, key, Group, "0").Err()
			if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				c.cfg.Logger.Warn("rcq: create consumer group", zap.String("stream", key), zap.Error(err))
				continue
			}
			c.groups[key] = true
		}
		out = append(out, key)
	}
	return out
}

// reclaim takes over the entries other consumers read but did not acknowledge for ReclaimIdle.
func (c *Consumer) reclaim(ctx context.Context, streams []string) {
	for _, key := range streams {
		msgs, _, err := c.cfg.Client.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: key, Group: Group, Consumer: c.cfg.Name,
			MinIdle: c.cfg.ReclaimIdle, Start: "0-0", Count: int64(c.cfg.Batch)}).Result()
		if err != nil {
			if ctx.Err() == nil {
				c.cfg.Logger.Warn("rcq: reclaim commands", zap.String("stream", key), zap.Error(err))
			}
			continue
		}
		for _, m := range msgs {
			c.cfg.Logger.Info("rcq: reclaimed a command of a dead consumer", zap.String("stream", key), zap.String("entry", m.ID))
			c.handle(ctx, key, m)
		}
	}
}

// handle carries one entry out on its own goroutine (at most Batch at once): execute, reply,
// then acknowledge and delete the entry.
func (c *Consumer) handle(ctx context.Context, stream string, m redis.XMessage) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return // not acknowledged: the next consumer reclaims it
	}
	c.wg.Add(1)
	go func() {
		defer func() { <-c.sem; c.wg.Done() }()
		c.process(ctx, stream, m)
	}()
}

func (c *Consumer) process(ctx context.Context, stream string, m redis.XMessage) {
	raw, _ := m.Values[fieldCommand].(string)
	cmd := &messages.RuntimeCommand{}
	if err := proto.Unmarshal([]byte(raw), cmd); err != nil {
		c.cfg.Logger.Warn("rcq: drop an undecodable command", zap.String("stream", stream), zap.String("entry", m.ID), zap.Error(err))
		c.ack(ctx, stream, m.ID)
		return
	}
	res := remote.Execute(ctx, c.cfg.Backend, cmd, time.Now())
	if ctx.Err() != nil {
		return // stopping mid-command: leave the entry for the next consumer
	}
	if cmd.GetReplyTo() != "" {
		b, err := proto.Marshal(res)
		if err == nil {
			_, err = c.cfg.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.RPush(ctx, cmd.GetReplyTo(), b)
				p.Expire(ctx, cmd.GetReplyTo(), replyTTL)
				return nil
			})
		}
		if err != nil {
			c.cfg.Logger.Warn("rcq: reply", zap.String("command_id", cmd.GetCommandId()), zap.Error(err))
		}
	}
	c.ack(ctx, stream, m.ID)
}

// ack acknowledges and deletes a handled entry.
func (c *Consumer) ack(ctx context.Context, stream, id string) {
	if _, err := c.cfg.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, stream, Group, id)
		p.XDel(ctx, stream, id)
		return nil
	}); err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn("rcq: acknowledge command", zap.String("stream", stream), zap.String("entry", id), zap.Error(err))
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
