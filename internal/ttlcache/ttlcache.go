// Package ttlcache keeps values for a short time to spare store round trips on hot paths
// (tenant settings, a pipeline key's latest version). Writers on the same node invalidate
// entries at once (Drop); other nodes see a change within the TTL.
//
// # Usage
//
//	c := ttlcache.New[*messages.TenantSettings](time.Second)
//	if t, ok := c.Get(id); ok { ... }
//	c.Put(id, t)
//	c.Drop(id) // after this node changed the value
package ttlcache

import (
	"sync"
	"time"
)

// maxEntries bounds a cache: past it the cache starts over empty (entries are cheap to reload).
const maxEntries = 10000

// Cache maps string keys to values that expire ttl after they were put. Its methods are
// goroutine-safe and never block on I/O. The zero value is not usable; call New.
type Cache[V any] struct {
	ttl time.Duration
	mu  sync.Mutex // guards m
	m   map[string]entry[V]
}

type entry[V any] struct {
	v  V
	at time.Time
}

// New returns an empty cache whose entries live for ttl.
func New[V any](ttl time.Duration) *Cache[V] {
	return &Cache[V]{ttl: ttl, m: make(map[string]entry[V])}
}

// Get returns the value of k when it was put less than ttl ago.
func (c *Cache[V]) Get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || time.Since(e.at) > c.ttl {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put stores v under k from now.
func (c *Cache[V]) Put(k string, v V) {
	c.mu.Lock()
	if len(c.m) > maxEntries {
		c.m = make(map[string]entry[V])
	}
	c.m[k] = entry[V]{v: v, at: time.Now()}
	c.mu.Unlock()
}

// Drop forgets k.
func (c *Cache[V]) Drop(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
