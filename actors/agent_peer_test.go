package actors_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// The multi-node agent tests run every node as a child process of the test binary (a "peer"):
// protoactor's Remote.Start writes grpc's global logger, which races, under -race, with the
// gRPC goroutines of any other remote of the same process. The test process only drives the
// peers, through JSON lines on their stdin and stdout, and kills them for real.

// agentPeerEnv carries a peer's configuration; its presence makes TestAgentPeerProcess a peer.
const agentPeerEnv = "DAIR_AGENT_TEST_PEER"

// peerWait bounds every command to a peer and its start.
const peerWait = 30 * time.Second

// peerConfig configures one peer process.
type peerConfig struct {
	ID        string   `json:"id"`
	Seed      string   `json:"seed,omitempty"`
	Types     []string `json:"types,omitempty"`      // built-in agent types
	TestTypes []string `json:"test_types,omitempty"` // hang, tally, fail, private (globex only)
	HealthMS  int      `json:"health_ms,omitempty"`
	Threshold int      `json:"threshold,omitempty"`
	RPCMS     int      `json:"rpc_ms,omitempty"`
	// Profile is the membership profile: "local" (default) or "lan" (slow failure detection).
	Profile string `json:"profile,omitempty"`
}

// peerRequest is one command to a peer.
type peerRequest struct {
	ID        int        `json:"id"`
	Op        string     `json:"op"` // send, sendkeys, sendmany, sendbatch, publish, publishmany, subscribe, directory, tally, stop
	Type      string     `json:"type,omitempty"`
	Key       string     `json:"key,omitempty"`
	Keys      []string   `json:"keys,omitempty"`
	N         int        `json:"n,omitempty"`
	Tenant    string     `json:"tenant,omitempty"`
	Payload   string     `json:"payload,omitempty"`
	TimeoutMS int        `json:"timeout_ms,omitempty"`
	Topic     string     `json:"topic,omitempty"`
	Source    string     `json:"source,omitempty"`
	Subs      []*peerSub `json:"subs,omitempty"`
	// Batch is sendbatch's envelopes (Type, Key, Tenant, Payload, TimeoutMS each).
	Batch []peerRequest `json:"batch,omitempty"`
}

type peerSub struct {
	Tenant, Topic, Prefix, Type, Key string
}

// peerOutcome is a DeliveryOutcome as JSON.
type peerOutcome struct {
	Status   string `json:"status"`
	Response string `json:"response,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Worker   string `json:"worker,omitempty"`
}

// peerReply answers a peerRequest (same id).
type peerReply struct {
	ID         int                    `json:"id"`
	Err        string                 `json:"err,omitempty"`
	Outcome    *peerOutcome           `json:"outcome,omitempty"`
	Outcomes   []*peerOutcome         `json:"outcomes,omitempty"`
	Deliveries int                    `json:"deliveries,omitempty"`
	IDs        []string               `json:"ids,omitempty"`
	Directory  *actors.AgentDirectory `json:"directory,omitempty"`
	Tally      int64                  `json:"tally,omitempty"`
	Tally2     int64                  `json:"tally2,omitempty"`
	// WorkerInline is actors.AgentWorkerInline of the peer (op tally).
	WorkerInline uint64                         `json:"worker_inline,omitempty"`
	Ready        *struct{ Member, Addr string } `json:"ready,omitempty"`
}

// TestAgentPeerProcess is not a test: it is the entry point of a peer process.
func TestAgentPeerProcess(t *testing.T) {
	raw := os.Getenv(agentPeerEnv)
	if raw == "" {
		t.Skip("runs only as a peer process of the multi-node agent tests")
	}
	os.Exit(runAgentPeer(raw))
}

// peerTally and peerTally2 count the messages the "tally" and "tally2" agents of a peer handled.
var peerTally, peerTally2 atomic.Int64

// peerTestTypes are the agent types tests can register on peers.
var peerTestTypes = map[string]func() (actors.AgentHandler, []actors.AgentTypeOption){
	"hang": func() (actors.AgentHandler, []actors.AgentTypeOption) {
		return func(ctx context.Context, _ *actors.Agent, _ *messages.MessageEnvelope) ([]byte, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil
	},
	"tally": func() (actors.AgentHandler, []actors.AgentTypeOption) {
		return func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
			return []byte(fmt.Sprint(peerTally.Add(1))), nil
		}, nil
	},
	"tally2": func() (actors.AgentHandler, []actors.AgentTypeOption) {
		return func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
			return []byte(fmt.Sprint(peerTally2.Add(1))), nil
		}, nil
	},
	"fail": func() (actors.AgentHandler, []actors.AgentTypeOption) {
		return func(_ context.Context, _ *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
			if string(env.Payload) == `"panic"` {
				panic("asked to panic")
			}
			return nil, errors.New("the fail agent fails")
		}, nil
	},
	"private": func() (actors.AgentHandler, []actors.AgentTypeOption) {
		return func(_ context.Context, a *actors.Agent, _ *messages.MessageEnvelope) ([]byte, error) {
			return []byte(`"` + a.Tenant() + `"`), nil
		}, []actors.AgentTypeOption{actors.ForTenants("globex")}
	},
}

// runAgentPeer runs one node until stdin closes or a stop command, answering commands.
func runAgentPeer(raw string) int {
	var cfg peerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "peer config:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "dair-agent-peer-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer temp dir:", err)
		return 2
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := startPeerNode(cfg, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer start:", err)
		return 1
	}
	out := json.NewEncoder(os.Stdout)
	var outMu sync.Mutex
	write := func(r peerReply) {
		outMu.Lock()
		defer outMu.Unlock()
		if err := out.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, "peer write:", err)
		}
	}
	write(peerReply{Ready: &struct{ Member, Addr string }{p.node.Incarnation(), p.members.Self().MemberlistAddr}})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	var wg sync.WaitGroup
	for in.Scan() {
		var req peerRequest
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "peer command:", err)
			continue
		}
		if req.Op == "stop" {
			wg.Wait()
			write(p.stop(req))
			return 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			write(p.do(req))
		}()
	}
	return 0 // stdin closed: the test is over; the process just ends
}

// peerNode is the node of a peer process.
type peerNode struct {
	node    *actors.Node
	members *cluster.Membership
	sys     *actor.ActorSystem
}

func startPeerNode(cfg peerConfig, dir string) (*peerNode, error) {
	ctx, cancel := context.WithTimeout(context.Background(), peerWait)
	defer cancel()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	var join []string
	if cfg.Seed != "" {
		join = []string{cfg.Seed}
	}
	profile := cluster.ProfileLocal
	if cfg.Profile != "" {
		profile = cluster.Profile(cfg.Profile)
	}
	m, err := cluster.Start(ctx, sys, cluster.Config{NodeID: cfg.ID, Join: join, Profile: profile,
		Roles: []string{actors.RoleRuntime}, ActorHost: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(dir, "dair.db"), NoSync: true})
	if err != nil {
		return nil, err
	}
	knobs := agents.Config{HealthInterval: time.Duration(cfg.HealthMS) * time.Millisecond, FailureThreshold: cfg.Threshold,
		RPCTimeout: time.Duration(cfg.RPCMS) * time.Millisecond}
	n, err := actors.Start(ctx, actors.Config{NodeID: cfg.ID, Store: st, Roles: []string{actors.RoleRuntime}, System: sys,
		Cluster: m, AgentTypes: cfg.Types, Agents: knobs, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.TestTypes {
		h, opts := peerTestTypes[name]()
		if err := n.RegisterAgentType(ctx, name, h, opts...); err != nil {
			return nil, err
		}
	}
	return &peerNode{node: n, members: m, sys: sys}, nil
}

// do runs one command.
func (p *peerNode) do(req peerRequest) peerReply {
	ctx, cancel := context.WithTimeout(context.Background(), peerWait)
	defer cancel()
	r := peerReply{ID: req.ID}
	snap := &messages.ExecutionContextSnapshot{TenantId: req.Tenant}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	send := func(key string) *peerOutcome {
		o, err := p.node.SendAgent(ctx, &messages.AgentId{Type: req.Type, Key: key}, []byte(req.Payload), snap, timeout)
		if err != nil {
			return &peerOutcome{Status: "go-error", Reason: err.Error()}
		}
		return &peerOutcome{Status: agents.StatusName(o.Status), Response: string(o.Response), Reason: o.Reason, Worker: o.WorkerId}
	}
	switch req.Op {
	case "send":
		r.Outcome = send(req.Key)
	case "sendkeys":
		for _, k := range req.Keys {
			r.Outcomes = append(r.Outcomes, send(k))
		}
	case "sendmany":
		for range req.N {
			r.Outcomes = append(r.Outcomes, send(req.Key))
		}
	case "sendbatch":
		r.Outcomes, r.Err = p.sendBatch(ctx, req.Batch)
	case "publish", "publishmany":
		for range max(req.N, 1) {
			d, err := p.node.PublishAgent(ctx, &messages.TopicId{Type: req.Topic, Source: req.Source}, []byte(req.Payload), snap)
			if err != nil {
				r.Err = err.Error()
				break
			}
			r.Deliveries += d
		}
	case "subscribe":
		var subs []*messages.Subscription
		for _, s := range req.Subs {
			subs = append(subs, &messages.Subscription{TenantId: s.Tenant, Topic: s.Topic, TopicPrefix: s.Prefix, AgentType: s.Type, AgentKey: s.Key})
		}
		ids, err := p.node.Subscribe(ctx, subs...)
		r.IDs = ids
		if err != nil {
			r.Err = err.Error()
		}
	case "directory":
		d, err := p.node.AgentDirectory(ctx)
		r.Directory = d
		if err != nil {
			r.Err = err.Error()
		}
	case "tally":
		r.Tally, r.Tally2, r.WorkerInline = peerTally.Load(), peerTally2.Load(), actors.AgentWorkerInline(p.node)
	default:
		r.Err = "unknown op " + req.Op
	}
	return r
}

// sendBatch sends reqs as one SendAgentBatch.
func (p *peerNode) sendBatch(ctx context.Context, reqs []peerRequest) ([]*peerOutcome, string) {
	envs := make([]*messages.MessageEnvelope, len(reqs))
	for i, q := range reqs {
		envs[i] = &messages.MessageEnvelope{Recipient: &messages.AgentId{Type: q.Type, Key: q.Key}, Payload: []byte(q.Payload),
			Snapshot: &messages.ExecutionContextSnapshot{TenantId: q.Tenant}}
		if q.TimeoutMS > 0 {
			envs[i].Deadline = time.Now().Add(time.Duration(q.TimeoutMS) * time.Millisecond).UnixNano()
		}
	}
	outs, err := p.node.SendAgentBatch(ctx, envs)
	if err != nil {
		return nil, err.Error()
	}
	r := make([]*peerOutcome, len(outs))
	for i, o := range outs {
		r[i] = &peerOutcome{Status: agents.StatusName(o.Status), Response: string(o.Response), Reason: o.Reason, Worker: o.WorkerId}
	}
	return r, ""
}

// stop stops the node in order (agents drain), leaves the cluster and reports the tally.
func (p *peerNode) stop(req peerRequest) peerReply {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(req.TimeoutMS, 1))*time.Millisecond)
	defer cancel()
	r := peerReply{ID: req.ID}
	if err := p.node.Stop(ctx); err != nil {
		r.Err = err.Error()
	}
	r.Tally, r.Tally2 = peerTally.Load(), peerTally2.Load()
	if err := p.members.Shutdown(true); err != nil && r.Err == "" {
		r.Err = err.Error()
	}
	p.sys.Shutdown()
	return r
}

// agentPeer is the test's handle on one peer process. call is goroutine-safe; the lifecycle
// methods (kill, pause, resume) must be called from the test goroutine.
type agentPeer struct {
	t      *testing.T
	cfg    peerConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	member string // the peer's member (worker) id
	addr   string // its memberlist address
	exited chan struct{}

	mu      sync.Mutex // guards enc, next, pending
	enc     *json.Encoder
	next    int
	pending map[int]chan peerReply
}

// startAgentPeer starts a peer and waits until it is ready. The peer is killed with t.Cleanup.
func startAgentPeer(t *testing.T, cfg peerConfig) *agentPeer {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentPeerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), agentPeerEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start peer %s: %v", cfg.ID, err)
	}
	p := &agentPeer{t: t, cfg: cfg, cmd: cmd, stdin: stdin, exited: make(chan struct{}), enc: json.NewEncoder(stdin),
		pending: map[int]chan peerReply{}}
	ready := make(chan peerReply, 1)
	p.pending[0] = ready
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		p.read(stdout)
	}()
	go func() {
		<-readerDone
		// A killed peer's exit status carries no information; its stderr is the test's.
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.close)
	timer := time.NewTimer(peerWait)
	defer timer.Stop()
	select {
	case r := <-ready:
		p.member, p.addr = r.Ready.Member, r.Ready.Addr
	case <-p.exited:
		t.Fatalf("peer %s exited before ready", cfg.ID)
	case <-timer.C:
		t.Fatalf("peer %s not ready within %v", cfg.ID, peerWait)
	}
	return p
}

// read dispatches the peer's replies to their callers until its stdout closes.
func (p *agentPeer) read(stdout io.Reader) {
	dec := json.NewDecoder(stdout)
	for {
		var r peerReply
		if err := dec.Decode(&r); err != nil {
			return
		}
		p.mu.Lock()
		ch := p.pending[r.ID]
		delete(p.pending, r.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// start sends req and returns the channel its reply arrives on.
func (p *agentPeer) start(req peerRequest) <-chan peerReply {
	ch := make(chan peerReply, 1)
	p.mu.Lock()
	p.next++
	req.ID = p.next
	p.pending[req.ID] = ch
	err := p.enc.Encode(req)
	p.mu.Unlock()
	if err != nil {
		ch <- peerReply{ID: req.ID, Err: "write command: " + err.Error()}
	}
	return ch
}

// call sends req and waits for its reply (an Err reply when the peer dies or is silent).
func (p *agentPeer) call(req peerRequest) peerReply {
	return p.await(p.start(req))
}

func (p *agentPeer) await(ch <-chan peerReply) peerReply {
	timer := time.NewTimer(peerWait)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r
	case <-p.exited:
		return peerReply{Err: "peer " + p.cfg.ID + " exited"}
	case <-timer.C:
		return peerReply{Err: "peer " + p.cfg.ID + " did not answer"}
	}
}

// close ends the peer at the end of the test: stdin closes (the peer exits), SIGKILL if it has
// not within a few seconds.
func (p *agentPeer) close() {
	if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		p.t.Logf("close peer %s stdin: %v", p.cfg.ID, err)
	}
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.kill()
	}
}

// kill sends SIGKILL and waits for the process to end. It is idempotent.
func (p *agentPeer) kill() {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Logf("kill peer %s: %v", p.cfg.ID, err)
	}
	<-p.exited
}

// pause and resume send SIGSTOP and SIGCONT.
func (p *agentPeer) pause()  { p.signal(syscall.SIGSTOP) }
func (p *agentPeer) resume() { p.signal(syscall.SIGCONT) }

func (p *agentPeer) signal(s syscall.Signal) {
	if err := p.cmd.Process.Signal(s); err != nil {
		p.t.Fatalf("signal peer %s: %v", p.cfg.ID, err)
	}
}
