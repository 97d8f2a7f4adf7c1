package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// redisServerPath is where CI installs redis-server; PATH is searched when it is missing.
const redisServerPath = "/usr/bin/redis-server"

// redisStartTimeout bounds how long StartRedis and Restart wait for PING to answer.
const redisStartTimeout = 10 * time.Second

// redisStopTimeout bounds how long Stop waits for a graceful exit before killing.
const redisStopTimeout = 5 * time.Second

// Sentinel errors of the launchers.
var (
	// ErrRedisNotInstalled is returned when no redis-server binary can be found.
	ErrRedisNotInstalled = errors.New("testkit: redis-server not installed")
	// ErrRedisNotRunning is returned by Kill and Stop when the server is not running.
	ErrRedisNotRunning = errors.New("testkit: redis-server not running")
	// ErrRedisRunning is returned by Restart when the server is still running.
	ErrRedisRunning = errors.New("testkit: redis-server already running")
)

// RedisOptions configures StartRedis. The zero value is a non-persistent server.
type RedisOptions struct {
	// AOF turns on the append-only file so data survives Kill and Restart. Default false.
	AOF bool
	// AppendFsync is "always" or "everysec". Default "everysec".
	AppendFsync string
	// Dir holds the AOF and the server log. Default t.TempDir().
	Dir string
}

// Redis is a redis-server process started by StartRedis on 127.0.0.1. Its methods are safe for
// concurrent use. The process is killed by t.Cleanup when the test ends.
type Redis struct {
	bin  string
	port int
	opts RedisOptions
	log  string

	mu   sync.Mutex    // guards cmd and done
	cmd  *exec.Cmd     // running process, nil when stopped
	done chan struct{} // closed when cmd has exited
}

// RedisBinary returns the path of redis-server or ErrRedisNotInstalled.
func RedisBinary() (string, error) {
	if st, err := os.Stat(redisServerPath); err == nil && !st.IsDir() {
		return redisServerPath, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("testkit: look up redis-server: %w", ErrRedisNotInstalled)
	}
	return p, nil
}

// RequireRedis skips the test when redis-server is not installed. CI installs it, so there the
// Redis tests always run.
func RequireRedis(t testing.TB) {
	t.Helper()
	if _, err := RedisBinary(); err != nil {
		t.Skipf("testkit: redis-server not found at %s or on PATH; install redis (apt-get install redis-server) to run this test", redisServerPath)
	}
}

// StartRedis starts redis-server on a free loopback port and blocks until it answers PING. It
// fails the test if the server cannot start, and skips it (via RequireRedis) when redis-server
// is not installed. The server is killed when the test ends.
func StartRedis(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	RequireRedis(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	r, err := LaunchRedis(opts)
	if err != nil {
		t.Fatalf("testkit: start redis: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Kill(); err != nil && !errors.Is(err, ErrRedisNotRunning) {
			t.Errorf("testkit: kill redis at cleanup: %v", err)
		}
	})
	return r
}

// LaunchRedis is StartRedis without a test: for a server shared by a whole test binary,
// started in TestMain. opts.Dir is required. The caller owns the process and must Kill or Stop
// it. It blocks until PING answers and returns ErrRedisNotInstalled when there is no binary.
func LaunchRedis(opts RedisOptions) (*Redis, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	if opts.AppendFsync == "" {
		opts.AppendFsync = "everysec"
	}
	if opts.AppendFsync != "always" && opts.AppendFsync != "everysec" {
		return nil, fmt.Errorf("testkit: launch redis: appendfsync %q is not always or everysec", opts.AppendFsync)
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("testkit: launch redis: Dir is required")
	}
	r := &Redis{bin: bin, opts: opts, log: filepath.Join(opts.Dir, "redis-server.log")}
	// A free port can be taken between probing and binding; retry with a new one.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r.port = port
		if lastErr = r.start(); lastErr == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w\n%s", lastErr, r.logTail())
}

// Addr returns "127.0.0.1:PORT".
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// URL returns "redis://127.0.0.1:PORT/0".
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Port returns the TCP port the server listens on; it stays the same across Restart.
func (r *Redis) Port() int { return r.port }

// Dir returns the directory holding the AOF and the server log.
func (r *Redis) Dir() string { return r.opts.Dir }

// LogPath returns the server's log file (appended to across restarts).
func (r *Redis) LogPath() string { return r.log }

// Kill sends SIGKILL and blocks until the process has exited. Unsynced AOF writes are lost, as
// in a crash. It returns ErrRedisNotRunning when the server is not running.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return ErrRedisNotRunning
	}
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testkit: kill redis: %w", err)
	}
	<-r.done
	r.cmd, r.done = nil, nil
	return nil
}

// Stop sends SIGTERM (Redis flushes its AOF and exits) and blocks until the process has exited,
// killing it after a timeout. It returns ErrRedisNotRunning when the server is not running.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return ErrRedisNotRunning
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testkit: stop redis: %w", err)
	}
	select {
	case <-r.done:
	case <-time.After(redisStopTimeout):
		if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("testkit: stop redis: kill after timeout: %w", err)
		}
		<-r.done
	}
	r.cmd, r.done = nil, nil
	return nil
}

// Restart starts the server again on the same port and directory (with AOF on, it reloads its
// data) and blocks until it answers PING. The server must have been killed or stopped first;
// otherwise Restart returns ErrRedisRunning.
func (r *Redis) Restart() error {
	if err := r.start(); err != nil {
		return fmt.Errorf("%w\n%s", err, r.logTail())
	}
	return nil
}

// start launches the process and waits for PING.
func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return ErrRedisRunning
	}
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testkit: open redis log: %w", err)
	}
	aof := "no"
	if r.opts.AOF {
		aof = "yes"
	}
	cmd := exec.Command(r.bin,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", aof,
		"--appendfsync", r.opts.AppendFsync,
		"--dir", r.opts.Dir,
		"--protected-mode", "no",
	)
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		if cerr := logf.Close(); cerr != nil {
			return fmt.Errorf("testkit: start redis-server: %w (close log: %v)", err, cerr)
		}
		return fmt.Errorf("testkit: start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		// The exit status of a killed server is expected to be an error; the log explains it.
		if werr := cmd.Wait(); werr != nil {
			fmt.Fprintf(logf, "testkit: redis-server exited: %v\n", werr)
		}
		if cerr := logf.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "testkit: close redis log: %v\n", cerr)
		}
		close(done)
	}()
	r.cmd, r.done = cmd, done

	deadline := time.Now().Add(redisStartTimeout)
	for {
		perr := ping(r.Addr())
		if perr == nil {
			return nil
		}
		select {
		case <-done:
			r.cmd, r.done = nil, nil
			return fmt.Errorf("testkit: redis-server on port %d exited during start: %w", r.port, perr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return fmt.Errorf("testkit: kill unresponsive redis-server: %w", err)
			}
			<-done
			r.cmd, r.done = nil, nil
			return fmt.Errorf("testkit: redis-server on port %d did not answer PING within %s: %w", r.port, redisStartTimeout, perr)
		}
	}
}

// logTail returns the last lines of the server log for failure messages.
func (r *Redis) logTail() string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return fmt.Sprintf("(no redis log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "redis-server log " + r.log + ":\n" + strings.Join(lines, "\n")
}

// ping sends an inline PING and expects +PONG. A server still loading its AOF answers -LOADING,
// which counts as not ready.
func ping(addr string) (err error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return fmt.Errorf("testkit: dial redis: %w", err)
	}
	defer func() {
		if cerr := conn.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("testkit: close ping connection: %w", cerr)
		}
	}()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return fmt.Errorf("testkit: ping redis: %w", err)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return fmt.Errorf("testkit: ping redis: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("testkit: ping redis: %w", err)
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("testkit: ping redis: unexpected answer %q", strings.TrimSpace(line))
	}
	return nil
}
