package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Batcher exposes the store's command batcher to the package's tests.
type Batcher struct{ b *batcher }

func NewBatcher(rdb *redis.Client, flights int) Batcher { return Batcher{newBatcher(rdb, flights)} }

func (b Batcher) Do(ctx context.Context, cmd redis.Cmder) error { return b.b.do(ctx, cmd) }

// InFlight returns the pipelines in flight.
func (b Batcher) InFlight() int {
	b.b.mu.Lock()
	defer b.b.mu.Unlock()
	return b.b.flying
}

// Queued returns the commands waiting for a flight.
func (b Batcher) Queued() int {
	b.b.mu.Lock()
	defer b.b.mu.Unlock()
	return len(b.b.queue)
}
