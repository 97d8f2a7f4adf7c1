package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
)

// debugTimeout bounds a call of a node's fault-injection endpoint.
const debugTimeout = 5 * time.Second

// Node is one `dair node` process of a Cluster. Its id, membership (bind) address and HTTP
// address stay the same across Restart. Its methods are safe for concurrent use.
type Node struct {
	id      string
	bind    string
	http    string
	args    []string
	bin     string
	logPath string

	mu          sync.Mutex    // guards cmd, exited, stopped, partitioned
	cmd         *exec.Cmd     // the current process; nil before the first start
	exited      chan struct{} // closed when cmd has exited
	stopped     bool          // SIGSTOPped and not yet SIGCONTed
	partitioned bool          // cut off by Partition and not yet healed
}

// ID returns the node's logical id (--node-id).
func (n *Node) ID() string { return n.id }

// URL returns the node's HTTP API base URL.
func (n *Node) URL() string { return "http://" + n.http }

// Client returns an API client of the node (auth none).
func (n *Node) Client() *client.Client { return client.New(n.URL(), "") }

// LogPath returns the file every incarnation of the node writes its output to.
func (n *Node) LogPath() string { return n.logPath }

// Running reports whether the node's process is alive (possibly SIGSTOPped).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked()
}

func (n *Node) runningLocked() bool {
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

// PID returns the process id of the node's current process, or 0 when it does not run.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Reachable reports whether the node runs, is not stopped and not partitioned: its HTTP API
// answers and its membership view is current.
func (n *Node) Reachable() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runningLocked() && !n.stopped && !n.partitioned
}

// Kill sends SIGKILL and blocks until the process is gone (kill -9: no leave, no flush). It
// returns ErrNotRunning when the node does not run.
func (n *Node) Kill() error {
	n.mu.Lock()
	if !n.runningLocked() {
		n.mu.Unlock()
		return ErrNotRunning
	}
	cmd, exited := n.cmd, n.exited
	n.stopped, n.partitioned = false, false
	n.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("localcluster: kill %s: %w", n.id, err)
	}
	<-exited
	return nil
}

// Stop sends SIGSTOP: the process freezes (its membership stops answering probes) until Cont.
func (n *Node) Stop() error {
	return n.signal(syscall.SIGSTOP, func() { n.stopped = true })
}

// Cont sends SIGCONT to a stopped node.
func (n *Node) Cont() error {
	return n.signal(syscall.SIGCONT, func() { n.stopped = false })
}

// Restart starts a killed (or exited) node again with the same id and addresses and blocks
// until it answers /readyz or ctx ends. It joins the others as a new member. It returns
// ErrRunning when the node still runs.
func (n *Node) Restart(ctx context.Context) error {
	if n.Running() {
		return fmt.Errorf("localcluster: restart %s: %w", n.id, ErrRunning)
	}
	return n.start(ctx)
}

// Partition cuts the node's membership transport off (POST /debug/partition): it drops every
// gossip packet and stream, while its store connection and HTTP API stay up. The others
// declare it dead after their failure timeout.
func (n *Node) Partition(ctx context.Context) error {
	if err := n.debug(ctx, "/debug/partition"); err != nil {
		return err
	}
	n.mu.Lock()
	n.partitioned = true
	n.mu.Unlock()
	return nil
}

// Heal restores the node's membership transport (POST /debug/heal). A node declared dead
// meanwhile learns it and restarts under a new member id.
func (n *Node) Heal(ctx context.Context) error {
	if err := n.debug(ctx, "/debug/heal"); err != nil {
		return err
	}
	n.mu.Lock()
	n.partitioned = false
	n.mu.Unlock()
	return nil
}

// Members returns the node's membership view (GET /v1/cluster/members). It blocks on HTTP.
func (n *Node) Members(ctx context.Context) (*httpapi.MemberList, error) {
	var ml httpapi.MemberList
	if err := HTTPCall(ctx, http.MethodGet, n.URL()+"/v1/cluster/members", http.StatusOK, &ml); err != nil {
		return nil, fmt.Errorf("localcluster: members of %s: %w", n.id, err)
	}
	return &ml, nil
}

// start launches the process and waits until /readyz answers 200.
func (n *Node) start(ctx context.Context) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localcluster: open log of %s: %w", n.id, err)
	}
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return errors.Join(fmt.Errorf("localcluster: start %s: %w", n.id, err), logf.Close())
	}
	exited := make(chan struct{})
	go func() {
		// A killed node's exit status carries no information; its log has the output.
		if werr := cmd.Wait(); werr != nil {
			fmt.Fprintf(logf, "localcluster: node %s exited: %v\n", n.id, werr)
		}
		if cerr := logf.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "localcluster: close log of %s: %v\n", n.id, cerr)
		}
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited, n.stopped, n.partitioned = cmd, exited, false, false
	n.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- n.Client().WaitReady(wctx, 50*time.Millisecond) }()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("localcluster: node %s not ready: %w\n%s", n.id, err, logTail(n.logPath, 30))
		}
		return nil
	case <-exited:
		cancel()
		<-ready
		return fmt.Errorf("localcluster: node %s exited before ready\n%s", n.id, logTail(n.logPath, 30))
	}
}

// signal sends sig to the running process and then applies mark under the lock.
func (n *Node) signal(sig syscall.Signal, mark func()) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return fmt.Errorf("localcluster: signal %s: %w", n.id, ErrNotRunning)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("localcluster: signal %v to %s: %w", sig, n.id, err)
	}
	mark()
	return nil
}

// debug POSTs to a fault-injection endpoint of the node.
func (n *Node) debug(ctx context.Context, path string) error {
	if !n.Running() {
		return fmt.Errorf("localcluster: %s %s: %w", path, n.id, ErrNotRunning)
	}
	ctx, cancel := context.WithTimeout(ctx, debugTimeout)
	defer cancel()
	if err := HTTPCall(ctx, http.MethodPost, n.URL()+path, http.StatusNoContent, nil); err != nil {
		return fmt.Errorf("localcluster: %s %s: %w", path, n.id, err)
	}
	return nil
}

// HTTPCall sends a bodyless request with http.DefaultClient, checks that the answer has status
// want and decodes its JSON body into out (when out is not nil). It blocks on HTTP until ctx
// ends; testkit's process nodes share it.
func HTTPCall(ctx context.Context, method, url string, want int, out any) (err error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer func() {
		if cerr := resp.Body.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close body: %w", cerr))
		}
	}()
	if resp.StatusCode != want {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.Join(fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, strings.TrimSpace(string(b))), rerr)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, url, err)
	}
	return nil
}
