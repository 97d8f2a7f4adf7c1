package localcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedis_KillRestartKeepsAcknowledgedWrites(t *testing.T) {
	if _, err := RedisBinary(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := StartRedis(ctx, RedisOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if r.Running() {
		t.Fatal("running after Kill")
	}
	if err := r.Kill(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second Kill: %v, want ErrNotRunning", err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart of a running server: %v, want ErrRunning", err)
	}
	got, err := c.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("after kill -9 and restart: %q, %v; want the acknowledged write", got, err)
	}
}
