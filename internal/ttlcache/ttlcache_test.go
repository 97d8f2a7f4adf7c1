package ttlcache_test

import (
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/ttlcache"
)

func TestCache_GetPutDrop(t *testing.T) {
	c := ttlcache.New[int](time.Hour)
	if _, ok := c.Get("a"); ok {
		t.Fatal("empty cache returned a value")
	}
	c.Put("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get = %d, %v; want 1, true", v, ok)
	}
	c.Drop("a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("dropped key still cached")
	}
}

func TestCache_Get_expires(t *testing.T) {
	c := ttlcache.New[int](time.Nanosecond)
	c.Put("a", 1)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if _, ok := c.Get("a"); !ok {
			return
		}
	}
	t.Fatal("entry outlived its ttl")
}
