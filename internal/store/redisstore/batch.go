package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// defaultFlights is Options.Flights' default.
const defaultFlights = 8

// batcher sends the store's concurrent commands in pipelines (natural batching, as the ledger
// committer does for step commits): a command that finds fewer than flights pipelines in
// flight is sent at once, with the commands queued before it; the others queue, and the next
// pipeline to finish hands the queue over to one of them, which sends it whole. Under light
// load every command goes alone and at once; under heavy load many commands share one write
// and one read, which is most of what a round trip costs a small machine. Each command keeps
// its own reply and error (a connection error fails every command of its pipeline, as it would
// have failed each alone). Only the store's own calls go through it (scripts and the hot
// reads), never a connection's set-up. Goroutine-safe.
type batcher struct {
	rdb     *redis.Client
	flights int

	mu     sync.Mutex // guards queue and flying
	queue  []*batchCall
	flying int // pipelines in flight
}

// batchCall is one queued command. lead is closed when the call is handed a queue to send
// (batch); done when its command has its reply.
type batchCall struct {
	cmd   redis.Cmder
	batch []*batchCall
	lead  chan struct{}
	done  chan struct{}
}

func newBatcher(rdb *redis.Client, flights int) *batcher {
	if flights <= 0 {
		flights = defaultFlights
	}
	return &batcher{rdb: rdb, flights: flights}
}

// do sends cmd, alone or in a pipeline with other callers' commands, and returns its error
// once it has its reply. A queued command waits for its pipeline whatever ctx does (the
// client's read and write timeouts bound the wait).
func (b *batcher) do(ctx context.Context, cmd redis.Cmder) error {
	c := &batchCall{cmd: cmd, done: make(chan struct{})}
	b.mu.Lock()
	if b.flying < b.flights {
		b.flying++
		batch := append(b.queue, c)
		b.queue = nil
		b.mu.Unlock()
		b.fly(ctx, batch)
		return cmd.Err()
	}
	c.lead = make(chan struct{})
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case <-c.done:
	case <-c.lead:
		b.fly(ctx, c.batch)
	}
	return cmd.Err()
}

// fly sends batch, marks its calls done, then hands the commands queued meanwhile to the first
// of them (the flight passes on) or ends the flight.
func (b *batcher) fly(ctx context.Context, batch []*batchCall) {
	if len(batch) == 1 {
		_ = b.rdb.Process(ctx, batch[0].cmd) // the command holds its error
	} else {
		// The pipeline carries other callers' commands: this caller's cancellation must not
		// fail them.
		pctx := context.WithoutCancel(ctx)
		_, _ = b.rdb.Pipelined(pctx, func(p redis.Pipeliner) error {
			for _, c := range batch {
				_ = p.Process(pctx, c.cmd)
			}
			return nil
		}) // each command holds its own error
	}
	for _, c := range batch {
		close(c.done)
	}
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.flying--
		b.mu.Unlock()
		return
	}
	next := b.queue[0]
	next.batch, b.queue = b.queue, nil
	b.mu.Unlock()
	close(next.lead)
}
