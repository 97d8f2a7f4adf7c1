package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRedis_Start_answersPing(t *testing.T) {
	tests := []struct {
		name string
		opts RedisOptions
	}{
		{name: "default", opts: RedisOptions{}},
		{name: "aof_always", opts: RedisOptions{AOF: true, AppendFsync: "always"}},
		{name: "aof_everysec", opts: RedisOptions{AOF: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := StartRedis(t, tt.opts)
			if err := ping(r.Addr()); err != nil {
				t.Fatalf("ping: %v", err)
			}
			if r.Port() == 0 {
				t.Fatal("port is zero")
			}
			if want := "redis://" + r.Addr() + "/0"; r.URL() != want {
				t.Fatalf("URL = %q, want %q", r.URL(), want)
			}
			if _, err := os.Stat(r.LogPath()); err != nil {
				t.Fatalf("log file: %v", err)
			}
		})
	}
}

func TestRedis_Restart_keepsPortAndAOF(t *testing.T) {
	tests := []struct {
		name string
		stop func(*Redis) error
	}{
		{name: "kill", stop: (*Redis).Kill},
		{name: "stop", stop: (*Redis).Stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := StartRedis(t, RedisOptions{AOF: true, AppendFsync: "always"})
			port := r.Port()
			if err := tt.stop(r); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if err := ping(r.Addr()); err == nil {
				t.Fatal("ping answered after stop")
			}
			if err := tt.stop(r); !errors.Is(err, ErrRedisNotRunning) {
				t.Fatalf("second stop = %v, want ErrRedisNotRunning", err)
			}
			if err := r.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
			if r.Port() != port {
				t.Fatalf("port changed from %d to %d", port, r.Port())
			}
			if err := ping(r.Addr()); err != nil {
				t.Fatalf("ping after restart: %v", err)
			}
			if err := r.Restart(); !errors.Is(err, ErrRedisRunning) {
				t.Fatalf("restart while running = %v, want ErrRedisRunning", err)
			}
			if _, err := os.Stat(filepath.Join(r.Dir(), "appendonlydir")); err != nil {
				t.Fatalf("aof dir: %v", err)
			}
		})
	}
}

func TestRedis_LaunchRedis_badOptions(t *testing.T) {
	RequireRedis(t)
	tests := []struct {
		name string
		opts RedisOptions
	}{
		{name: "noDir", opts: RedisOptions{}},
		{name: "badFsync", opts: RedisOptions{Dir: t.TempDir(), AppendFsync: "no"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := LaunchRedis(tt.opts)
			if err == nil {
				if kerr := r.Kill(); kerr != nil {
					t.Errorf("kill: %v", kerr)
				}
				t.Fatal("LaunchRedis succeeded")
			}
		})
	}
}
