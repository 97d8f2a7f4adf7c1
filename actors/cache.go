package actors

import (
	"sync"
	"time"
)

// ttlCache keeps values for a short time to spare store round trips on the hot path (tenant
// settings, a pipeline key's latest version). Writers on this node invalidate entries at once;
// other nodes see a change within the TTL. It is goroutine-safe.
type ttlCache[V any] struct {
	ttl time.Duration
	mu  sync.Mutex // guards m
	m   map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v  V
	at time.Time
}

func newTTLCache[V any](ttl time.Duration) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, m: make(map[string]ttlEntry[V])}
}

func (c *ttlCache[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || time.Since(e.at) > c.ttl {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k string, v V) {
	c.mu.Lock()
	if len(c.m) > 10000 {
		c.m = make(map[string]ttlEntry[V])
	}
	c.m[k] = ttlEntry[V]{v: v, at: time.Now()}
	c.mu.Unlock()
}

func (c *ttlCache[V]) drop(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
