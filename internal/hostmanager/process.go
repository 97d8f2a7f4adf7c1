package hostmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dairuntime/dair/messages"
)

// HostID returns the node id of the process host of runtime instance id ("host-<id>").
func HostID(instanceID string) string { return "host-" + instanceID }

// child is one spawned runtime host process.
type child struct {
	host Host
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been waited for

	// mu guards requested.
	mu        sync.Mutex
	requested bool
}

// markRequested records that the manager is stopping the child, so its exit is not reported
// as unexpected.
func (c *child) markRequested() {
	c.mu.Lock()
	c.requested = true
	c.mu.Unlock()
}

func (c *child) wasRequested() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requested
}

// terminate stops the child: SIGTERM, then SIGKILL once timeout has passed. It blocks until the
// process has exited.
func (c *child) terminate(timeout time.Duration) {
	c.markRequested()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		// The process is gone or cannot be signalled; Wait reports what happened.
		if kerr := c.cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			return
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-c.done
}

// spawn starts the process host of instance id and returns once it has started.
func (m *Manager) spawn(ctx context.Context, id string, settings *messages.TenantSettings, requestID string) error {
	if id == "" || settings == nil {
		return fmt.Errorf("hostmanager: create instance: missing id or settings")
	}
	m.mu.Lock()
	old := m.children[id]
	m.mu.Unlock()
	if old != nil {
		m.cfg.Logger.Info("stopping the previous host of a reused instance id", zap.String("runtime_instance_id", id),
			zap.Int("pid", old.host.PID))
		old.terminate(m.cfg.StopTimeout)
	}
	if d := m.cfg.StartDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("hostmanager: create instance %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
	js, err := protojson.Marshal(settings)
	if err != nil {
		return fmt.Errorf("hostmanager: encode settings of %s: %w", id, err)
	}
	seeds := m.cfg.Seeds()
	if len(seeds) == 0 {
		return fmt.Errorf("hostmanager: create instance %s: no cluster seed to join", id)
	}
	args := []string{"node", "--roles", "runtime", "--store", m.cfg.StoreURL, "--join", strings.Join(seeds, ","),
		"--node-id", HostID(id), "--bind", "127.0.0.1:0", "--cluster-profile", m.cfg.ClusterProfile,
		"--http", "127.0.0.1:0", "--log-level", m.cfg.LogLevel,
		"--instance", id, "--instance-settings", string(js)}
	if requestID != "" {
		args = append(args, "--instance-scale-out-request", requestID)
	}
	args = append(args, m.cfg.ExtraArgs...)

	dir := filepath.Join(m.cfg.DataDir, "hosts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hostmanager: create log dir: %w", err)
	}
	logPath := filepath.Join(dir, HostID(id)+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("hostmanager: open host log: %w", err)
	}
	cmd := exec.Command(m.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), m.cfg.Env...)
	cmd.SysProcAttr = sysProcAttr()
	c := &child{cmd: cmd, done: make(chan struct{}), host: Host{InstanceID: id, HostID: HostID(id), Mode: ModeProcess,
		LogPath: logPath, ScaleOutRequestID: requestID}}
	started := make(chan error, 1)
	m.wg.Add(1)
	go m.supervise(c, logf, started)
	select {
	case err := <-started:
		return err
	case <-ctx.Done():
		// The child starts (or fails) anyway; its supervisor owns it from here.
		return fmt.Errorf("hostmanager: create instance %s: %w", id, ctx.Err())
	}
}

// supervise starts the child, reports the start on started, waits for the exit and reports it.
//
// The goroutine stays locked to its OS thread for the child's lifetime: on Linux the child's
// parent-death signal fires when the thread that forked it exits, and Go may retire idle
// threads only when a locked goroutine exits; locking keeps the forking thread alive exactly as
// long as the child is supervised.
func (m *Manager) supervise(c *child, logf *os.File, started chan<- error) {
	defer m.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	log := m.cfg.Logger.With(zap.String("runtime_instance_id", c.host.InstanceID), zap.String("host_id", c.host.HostID))
	closeLog := func() {
		if err := logf.Close(); err != nil {
			log.Warn("close host log", zap.Error(err))
		}
	}
	if err := c.cmd.Start(); err != nil {
		closeLog()
		started <- fmt.Errorf("hostmanager: start host of %s: %w", c.host.InstanceID, err)
		return
	}
	c.host.PID = c.cmd.Process.Pid
	c.host.StartedAt = time.Now()
	m.mu.Lock()
	stopped := m.stopped
	if !stopped {
		m.children[c.host.InstanceID] = c
	}
	m.mu.Unlock()
	m.metrics.starts.Inc()
	m.metrics.running.Inc()
	log = log.With(zap.Int("pid", c.host.PID))
	if stopped {
		started <- ErrStopped
		c.markRequested()
		if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			log.Warn("kill host started during stop", zap.Error(err))
		}
	} else {
		log.Info("runtime host started", zap.String("log", c.host.LogPath))
		started <- nil
	}
	werr := c.cmd.Wait()
	close(c.done)
	closeLog()
	m.mu.Lock()
	if m.children[c.host.InstanceID] == c {
		delete(m.children, c.host.InstanceID)
	}
	m.mu.Unlock()
	m.metrics.running.Dec()
	ex := Exit{Host: c.host, Err: werr, Requested: c.wasRequested()}
	if ex.Requested {
		m.metrics.exits.WithLabelValues("requested").Inc()
		log.Info("runtime host stopped", zap.NamedError("exit", werr))
	} else {
		// Recovery takes the normal path: the child's member leaves the cluster, the control
		// plane declares it dead and requeues its runs, and admission asks for replacement
		// capacity in the scope whose instance count just dropped.
		m.metrics.exits.WithLabelValues("unexpected").Inc()
		log.Error("runtime host exited unexpectedly", zap.NamedError("exit", werr), zap.String("log", c.host.LogPath))
	}
	if m.cfg.OnExit != nil {
		m.cfg.OnExit(ex)
	}
}

// reap stops children whose instance has been missing from the registry for ReapAfter (the
// instance was scaled in or to zero, or never registered), so no empty host lingers.
func (m *Manager) reap() {
	defer m.wg.Done()
	every := m.cfg.ReapAfter / 4
	if every > 5*time.Second {
		every = 5 * time.Second
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	absent := map[*child]time.Time{}
	for {
		select {
		case <-m.stopCh:
			return
		case <-tk.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		list, err := m.cfg.Instances(ctx)
		cancel()
		if err != nil {
			m.cfg.Logger.Warn("host reaper: list instances", zap.Error(err))
			continue
		}
		present := map[string]bool{}
		for _, d := range list {
			if d.GetStatus() != messages.InstanceStopped {
				present[d.GetHostId()+"/"+d.GetRuntimeInstanceId()] = true
			}
		}
		m.mu.Lock()
		kids := make(map[*child]bool, len(m.children))
		for _, c := range m.children {
			kids[c] = true
		}
		m.mu.Unlock()
		for c := range absent {
			if !kids[c] {
				delete(absent, c)
			}
		}
		now := time.Now()
		for c := range kids {
			if present[c.host.HostID+"/"+c.host.InstanceID] || now.Sub(c.host.StartedAt) < m.cfg.ReapAfter {
				delete(absent, c)
				continue
			}
			since, ok := absent[c]
			if !ok {
				absent[c] = now
				continue
			}
			if now.Sub(since) < m.cfg.ReapAfter {
				continue
			}
			delete(absent, c)
			m.cfg.Logger.Info("stopping a runtime host whose instance left the registry",
				zap.String("runtime_instance_id", c.host.InstanceID), zap.Int("pid", c.host.PID))
			m.wg.Add(1)
			go func(c *child) {
				defer m.wg.Done()
				c.terminate(m.cfg.StopTimeout)
			}(c)
		}
	}
}
