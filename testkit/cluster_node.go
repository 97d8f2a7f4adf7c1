package testkit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/localcluster"
)

// ProcessNode is one `dair node` process of a ProcessCluster. Its id, membership (bind) address
// and HTTP address stay the same across Restart. Methods are goroutine-safe; the actions that
// fail the test (Kill, Stop, Cont, Restart, Partition, Heal) must be called from the test's
// goroutine.
type ProcessNode struct {
	c     *ProcessCluster
	id    string
	bind  string
	http  string
	roles []string
	extra []string // NodeArgs of this node
	logs  *logBuffer

	mu          sync.Mutex    // guards cmd, exited, stopped, partitioned
	cmd         *exec.Cmd     // the current process; nil before start
	exited      chan struct{} // closed when cmd has exited
	stopped     bool          // SIGSTOPped and not yet SIGCONTed
	partitioned bool          // cut off by Partition and not yet healed
}

// ID returns the node's logical id (--node-id).
func (n *ProcessNode) ID() string { return n.id }

// URL returns the node's HTTP API base URL.
func (n *ProcessNode) URL() string { return "http://" + n.http }

// BindAddr returns the node's membership address (--bind).
func (n *ProcessNode) BindAddr() string { return n.bind }

// Roles returns the node's --roles (nil: both). The caller owns the returned slice.
func (n *ProcessNode) Roles() []string { return append([]string(nil), n.roles...) }

// Client returns an API client for the node (auth none).
func (n *ProcessNode) Client() *client.Client { return client.New(n.URL(), "") }

// Logs returns everything the node's processes wrote so far (every incarnation, in order).
func (n *ProcessNode) Logs() string { return n.logs.String() }

// Running reports whether the node's process is alive (possibly SIGSTOPped).
func (n *ProcessNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked()
}

func (n *ProcessNode) runningLocked() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// reachable reports whether the node runs, is not stopped and not partitioned.
func (n *ProcessNode) reachable() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked() && !n.stopped && !n.partitioned
}

// Kill sends SIGKILL and blocks until the process is gone (kill -9: no leave, no flush).
func (n *ProcessNode) Kill() {
	n.c.t.Helper()
	if err := n.kill(); err != nil {
		n.c.t.Fatalf("testkit: kill %s: %v", n.id, err)
	}
}

// Stop sends SIGSTOP and waits until every thread of the process is stopped (on Linux): the
// process freezes (its membership stops answering probes) until Cont.
func (n *ProcessNode) Stop() {
	n.c.t.Helper()
	pid := 0
	if err := n.signal(syscall.SIGSTOP, func() { n.stopped, pid = true, n.cmd.Process.Pid }); err != nil {
		n.c.t.Fatalf("testkit: stop %s: %v", n.id, err)
	}
	if err := waitFrozen(pid); err != nil {
		n.c.t.Fatalf("testkit: stop %s: %v", n.id, err)
	}
}

// Cont sends SIGCONT to a stopped node.
func (n *ProcessNode) Cont() {
	n.c.t.Helper()
	if err := n.signal(syscall.SIGCONT, func() { n.stopped = false }); err != nil {
		n.c.t.Fatalf("testkit: cont %s: %v", n.id, err)
	}
}

// Restart starts a killed (or exited) node again with the same id, membership address and
// HTTP address, and waits until it answers /readyz. It joins the other nodes as a new member.
func (n *ProcessNode) Restart() {
	n.c.t.Helper()
	if n.Running() {
		n.c.t.Fatalf("testkit: restart %s: still running (Kill it first)", n.id)
	}
	if err := n.start(); err != nil {
		n.c.t.Fatalf("testkit: restart %s: %v", n.id, err)
	}
}

// Partition cuts the node's membership transport off (POST /debug/partition): it drops every
// gossip packet and stream. The node keeps its store connection and HTTP API; the other nodes
// declare it dead after their failure timeout.
func (n *ProcessNode) Partition() {
	n.c.t.Helper()
	if err := n.debug("/debug/partition"); err != nil {
		n.c.t.Fatalf("testkit: partition %s: %v", n.id, err)
	}
	n.mu.Lock()
	n.partitioned = true
	n.mu.Unlock()
}

// Heal restores the node's membership transport (POST /debug/heal). A node that was declared
// dead meanwhile learns it and restarts under a new member id.
func (n *ProcessNode) Heal() {
	n.c.t.Helper()
	if err := n.debug("/debug/heal"); err != nil {
		n.c.t.Fatalf("testkit: heal %s: %v", n.id, err)
	}
	n.mu.Lock()
	n.partitioned = false
	n.mu.Unlock()
}

// Members returns the node's membership view (GET /v1/cluster/members). It blocks on HTTP.
func (n *ProcessNode) Members(ctx context.Context) (*httpapi.MemberList, error) {
	var ml httpapi.MemberList
	if err := localcluster.HTTPCall(ctx, http.MethodGet, n.URL()+"/v1/cluster/members", http.StatusOK, &ml); err != nil {
		return nil, fmt.Errorf("testkit: members of %s: %w", n.id, err)
	}
	return &ml, nil
}

// MemberID returns the node's current member (actor system) id, which changes when the node
// restarts its actor system.
func (n *ProcessNode) MemberID(ctx context.Context) (string, error) {
	ml, err := n.Members(ctx)
	if err != nil {
		return "", err
	}
	return ml.Self, nil
}

// args returns the node's command line.
func (n *ProcessNode) args() []string {
	o := n.c.opts
	args := []string{"node", "--store", o.RedisURL, "--node-id", n.id, "--bind", n.bind, "--http", n.http,
		"--cluster-profile", o.Profile, "--log-level", o.LogLevel, "--fault-injection"}
	var join []string
	for _, m := range n.c.nodes {
		if m != n {
			join = append(join, m.bind)
		}
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	if len(n.roles) > 0 {
		args = append(args, "--roles", strings.Join(n.roles, ","))
	}
	args = append(args, o.ExtraArgs...)
	return append(args, n.extra...)
}

// start launches the process and waits until /readyz answers 200.
func (n *ProcessNode) start() error {
	cmd := exec.Command(n.c.opts.Binary, n.args()...)
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	exited := make(chan struct{})
	go func() {
		// The exit status of a killed test node carries no information; Logs has the output.
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(n.logs, "testkit: node %s exited: %v\n", n.id, err)
		}
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited, n.stopped, n.partitioned = cmd, exited, false, false
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- n.Client().WaitReady(ctx, 20*time.Millisecond) }()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("node %s not ready: %w\n%s", n.id, err, tail(n.Logs(), clusterLogTail))
		}
		return nil
	case <-exited:
		cancel()
		<-ready
		return fmt.Errorf("node %s exited before ready:\n%s", n.id, tail(n.Logs(), clusterLogTail))
	}
}

// kill sends SIGKILL and waits for the exit; ErrNodeDown when not running.
func (n *ProcessNode) kill() error {
	n.mu.Lock()
	if !n.runningLocked() {
		n.mu.Unlock()
		return ErrNodeDown
	}
	cmd, exited := n.cmd, n.exited
	n.stopped, n.partitioned = false, false
	n.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sigkill: %w", err)
	}
	<-exited
	return nil
}

// signal sends sig to the running process and then applies mark under the lock.
func (n *ProcessNode) signal(sig syscall.Signal, mark func()) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return ErrNodeDown
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v: %w", sig, err)
	}
	mark()
	return nil
}

// debug POSTs to a fault-injection endpoint of the node.
func (n *ProcessNode) debug(path string) error {
	if !n.Running() {
		return ErrNodeDown
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return localcluster.HTTPCall(ctx, http.MethodPost, n.URL()+path, http.StatusNoContent, nil)
}
