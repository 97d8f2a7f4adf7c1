package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dairuntime/dair/internal/netaddr"
)

// redisServerPath is where the Debian package installs redis-server; PATH is searched when it
// is missing.
const redisServerPath = "/usr/bin/redis-server"

// Sentinel errors of package localcluster.
var (
	// ErrRedisNotInstalled is returned by StartRedis when no redis-server binary can be found.
	ErrRedisNotInstalled = errors.New("localcluster: redis-server not installed")
	// ErrNotRunning is returned by Kill, Stop, Cont, Partition and Heal when the process is
	// not running (killed, or exited).
	ErrNotRunning = errors.New("localcluster: process not running")
	// ErrRunning is returned by Restart when the process is still running.
	ErrRunning = errors.New("localcluster: process already running")
)

// RedisOptions configures StartRedis.
type RedisOptions struct {
	// Dir holds the append-only file and the server log. Required.
	Dir string
	// AppendFsync is "always" (every acknowledged write survives a kill -9) or "everysec".
	// Default "always".
	AppendFsync string
}

// Redis is a redis-server on 127.0.0.1 with its append-only file on, so Kill and Restart lose
// no acknowledged write (with AppendFsync "always"). The caller owns the process: Close it.
type Redis struct {
	bin  string
	port int
	opts RedisOptions
	log  string

	mu   sync.Mutex    // guards cmd and done
	cmd  *exec.Cmd     // running process; nil when killed
	done chan struct{} // closed when cmd has exited
}

// RedisBinary returns the path of redis-server or an error wrapping ErrRedisNotInstalled.
func RedisBinary() (string, error) {
	if st, err := os.Stat(redisServerPath); err == nil && !st.IsDir() {
		return redisServerPath, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w (install redis-server, e.g. apt-get install redis-server)", ErrRedisNotInstalled)
	}
	return p, nil
}

// StartRedis starts redis-server on a free loopback port and blocks until it answers PING or
// ctx ends.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("localcluster: start redis: Dir is required")
	}
	if opts.AppendFsync == "" {
		opts.AppendFsync = "always"
	}
	if opts.AppendFsync != "always" && opts.AppendFsync != "everysec" {
		return nil, fmt.Errorf("localcluster: start redis: appendfsync %q is not always or everysec", opts.AppendFsync)
	}
	r := &Redis{bin: bin, opts: opts, log: filepath.Join(opts.Dir, "redis-server.log")}
	var lastErr error
	for range 3 { // a free port can be taken between the probe and the bind: retry with another
		if r.port, err = netaddr.FreePort(); err != nil {
			return nil, err
		}
		if lastErr = r.start(ctx); lastErr == nil {
			return r, nil
		}
	}
	return nil, lastErr
}

// Addr returns "127.0.0.1:PORT"; the port stays the same across Restart.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// URL returns "redis://127.0.0.1:PORT/0".
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// LogPath returns the server log (appended to across restarts).
func (r *Redis) LogPath() string { return r.log }

// Running reports whether the server process is alive.
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// Kill sends SIGKILL and blocks until the process has exited. It returns ErrNotRunning when
// the server is not running.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return ErrNotRunning
	}
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("localcluster: kill redis: %w", err)
	}
	<-r.done
	r.cmd, r.done = nil, nil
	return nil
}

// Restart starts a killed server again on the same port and directory (it reloads its AOF)
// and blocks until it answers PING or ctx ends. It returns ErrRunning when it still runs.
func (r *Redis) Restart(ctx context.Context) error { return r.start(ctx) }

// Close kills the server if it runs. It is idempotent.
func (r *Redis) Close() error {
	if err := r.Kill(); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return nil
}

// start launches the process and waits for PING.
func (r *Redis) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return ErrRunning
	}
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localcluster: open redis log: %w", err)
	}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--daemonize", "no",
		"--save", "", "--appendonly", "yes", "--appendfsync", r.opts.AppendFsync, "--dir", r.opts.Dir,
		"--protected-mode", "no")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return errors.Join(fmt.Errorf("localcluster: start redis-server: %w", err), logf.Close())
	}
	done := make(chan struct{})
	go func() {
		// A killed server's exit status is expected; the log explains any other.
		if werr := cmd.Wait(); werr != nil {
			fmt.Fprintf(logf, "localcluster: redis-server exited: %v\n", werr)
		}
		if cerr := logf.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "localcluster: close redis log: %v\n", cerr)
		}
		close(done)
	}()
	r.cmd, r.done = cmd, done
	if err := waitPing(ctx, r.Addr(), done); err != nil {
		if kerr := cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			err = errors.Join(err, kerr)
		}
		<-done
		r.cmd, r.done = nil, nil
		return fmt.Errorf("localcluster: redis-server on port %d: %w\n%s", r.port, err, logTail(r.log, 20))
	}
	return nil
}

// waitPing polls PING every 20ms until +PONG, the process exits (done) or ctx ends.
func waitPing(ctx context.Context, addr string, done <-chan struct{}) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		perr := ping(addr)
		if perr == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("exited during start: %w", perr)
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING: %w (last: %v)", ctx.Err(), perr)
		case <-t.C:
		}
	}
}

// ping sends an inline PING and expects +PONG; a server loading its AOF answers -LOADING,
// which counts as not ready.
func ping(addr string) (err error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return fmt.Errorf("dial redis: %w", err)
	}
	defer func() {
		if cerr := conn.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close ping connection: %w", cerr)
		}
	}()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("ping redis: unexpected answer %q", strings.TrimSpace(line))
	}
	return nil
}

// logTail returns the last n lines of the file at path, for error messages.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return path + ":\n" + strings.Join(lines, "\n")
}
