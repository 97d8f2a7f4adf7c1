package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// TestSecure_nodeRefusesInsecureSetups: `dair node` refuses to serve its API without auth off
// loopback, to gossip off loopback without a key, and half-configured TLS, with exit code 2.
func TestSecure_nodeRefusesInsecureSetups(t *testing.T) {
	bolt := "bolt://" + filepath.Join(t.TempDir(), "d.db")
	redis := "redis://127.0.0.1:1/0"
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"auth none on all interfaces", []string{"node", "--store", bolt, "--http", "0.0.0.0:0"}, "not loopback"},
		{"auth none on a public address", []string{"node", "--store", bolt, "--http", "192.0.2.10:8080"}, "not loopback"},
		{"public bind without gossip key", []string{"node", "--store", redis, "--http", testkit.FreeAddr(t), "--bind", "192.0.2.10:7946"},
			"--gossip-key-file"},
		{"public seed without gossip key", []string{"node", "--store", redis, "--http", testkit.FreeAddr(t), "--bind", "127.0.0.1:0",
			"--join", "192.0.2.11:7946"}, "--gossip-key-file"},
		{"tls without key and ca", []string{"node", "--store", redis, "--http", testkit.FreeAddr(t), "--bind", "127.0.0.1:0",
			"--tls-cert", "cert.pem"}, "go together"},
		{"metrics auth without jwt", []string{"node", "--store", bolt, "--http", testkit.FreeAddr(t), "--metrics-auth"}, "--auth jwt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dair(t, tc.args...)
			require.Equal(t, 2, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.wantErr)
		})
	}
}

// startTLSCluster starts a control-plane node "a" and a runtime node "b" on r, both with the
// node certificate nc, and waits until they see each other.
func startTLSCluster(t *testing.T, r *testkit.Redis, nc testkit.NodeCert) *testkit.ProcessCluster {
	t.Helper()
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: 2, RedisURL: r.URL(),
		NodeIDs: []string{"a", "b"}, Roles: [][]string{{actors.RoleControlPlane}, {actors.RoleRuntime}}, ExtraArgs: nc.Args()})
	pc.WaitTopology(2)
	return pc
}

// crossNodeRun puts a dedicated tenant and a one-step pipeline through c and submits one run.
func crossNodeRun(t *testing.T, ctx context.Context, c *client.Client, tenant string) string {
	t.Helper()
	_, err := c.PutTenant(ctx, httpapi.Tenant{TenantID: tenant, IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIDPrefix: tenant + "-runtime", MaxRuntimeInstances: 1, WorkerCountPerInstance: 2,
		MaxConcurrentRunsPerInstance: 2, LocalQueueCapacity: 10})
	require.NoError(t, err)
	_, err = c.PutPipeline(ctx, "one", []byte(echoPipeline))
	require.NoError(t, err)
	s, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "one", TenantID: tenant})
	require.NoError(t, err)
	return s.SharedRunID
}

// actorAddr returns the actor (remote) address node n advertises for itself.
func actorAddr(t *testing.T, ctx context.Context, n *testkit.ProcessNode) string {
	t.Helper()
	ml, err := n.Members(ctx)
	require.NoError(t, err)
	for _, m := range ml.Members {
		if m.ID == ml.Self {
			return m.Address
		}
	}
	t.Fatalf("node %s does not list itself: %+v", n.ID(), ml)
	return ""
}

// TestTLS_clusterDispatchesAcrossNodes: two nodes with mutual TLS on actor traffic; a run
// submitted to the control-plane node runs on the runtime node, and the actor port refuses a
// client without a certificate of the cluster's CA.
func TestTLS_clusterDispatchesAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ca := testkit.NewTestCA(t, "cluster")
	pc := startTLSCluster(t, r, ca.Issue(t, "node"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	a := pc.Node(0).Client()
	id := crossNodeRun(t, ctx, a, "xnode")
	run := waitAll(t, ctx, a, []string{id}, time.Minute)[id]
	require.Equal(t, messages.RunSucceeded, run.Status, run.FailureReason)
	require.NotEmpty(t, run.AssignedRuntimeInstanceID, "node a has no runtime role: the run ran on node b")

	// The actor port of b demands a client certificate of the cluster's CA.
	addr := actorAddr(t, ctx, pc.Node(1))
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ca.CertFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pem))
	stranger := testkit.NewTestCA(t, "stranger").Issue(t, "intruder")
	cert, err := tls.LoadX509KeyPair(stranger.CertFile, stranger.KeyFile)
	require.NoError(t, err)
	for name, certs := range map[string][]tls.Certificate{"no client certificate": nil, "foreign client certificate": {cert}} {
		err := tlsExchange(t, addr, &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS13})
		require.Error(t, err, "%s: the actor port accepted the client", name)
		t.Logf("%s: %v", name, err)
	}
	require.False(t, plainAccepted(t, addr), "plaintext gRPC reached the actor port")
}

// tlsExchange connects to addr with cfg, sends an HTTP/2 preface and reads: under TLS 1.3
// the server's verdict on the client's certificate arrives with the first read. It returns
// nil only when the connection stays open (the server accepted the client).
func tlsExchange(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer closeConn(t, conn)
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return err
	}
	return readVerdict(conn)
}

// readVerdict reads from conn: nil when the read times out with the connection open (the peer
// is waiting for more), else the read error or what the peer answered.
func readVerdict(conn net.Conn) error {
	if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return err
	}
	b := make([]byte, 64)
	n, err := conn.Read(b)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return nil
	case err != nil:
		return err
	default:
		return fmt.Errorf("peer answered %q", b[:n])
	}
}

// plainAccepted sends an HTTP/2 preface in plaintext and reports whether the actor port
// answered with an HTTP/2 frame (rather than closing, a TLS alert or waiting).
func plainAccepted(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer closeConn(t, conn)
	_, err = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	require.NoError(t, err)
	err = readVerdict(conn)
	// A plaintext gRPC server answers the preface with a SETTINGS frame (type 0x4 at byte 3).
	return err != nil && strings.Contains(err.Error(), "peer answered") && !strings.Contains(err.Error(), "\\x15\\x03")
}

func closeConn(t *testing.T, c io.Closer) {
	t.Helper()
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("close: %v", err)
	}
}

// soloNode is a `dair node` process a test starts by hand (with its own certificates).
type soloNode struct {
	http string
	logs *syncBuffer
}

// startSolo starts `dair node args...` (plus --http), waits for /readyz and kills it at the
// end of the test.
func startSolo(t *testing.T, args ...string) *soloNode {
	t.Helper()
	n := &soloNode{http: testkit.FreeAddr(t), logs: &syncBuffer{}}
	cmd := exec.Command(dairBin, append(args, "--http", n.http)...)
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(n.logs, "exited: %v\n", err)
		}
		close(exited)
	}()
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("kill: %v", err)
		}
		<-exited
		if t.Failed() {
			t.Logf("log of %v:\n%s", args, n.logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, client.New("http://"+n.http, "").WaitReady(ctx, 20*time.Millisecond), n.logs.String())
	return n
}

// TestTLS_wrongCANodeCannotJoinOrSend: a runtime node whose certificate comes from another CA
// reaches memberlist but never becomes a member on either side, a run submitted to the
// control plane never reaches it, and its certificate cannot open the control plane's actor
// port.
func TestTLS_wrongCANodeCannotJoinOrSend(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ca, rogue := testkit.NewTestCA(t, "cluster"), testkit.NewTestCA(t, "rogue")
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: 1, RedisURL: r.URL(),
		NodeIDs: []string{"a"}, Roles: [][]string{{actors.RoleControlPlane}}, ExtraArgs: ca.Issue(t, "a").Args()})
	a := pc.Node(0)
	rc := rogue.Issue(t, "b")
	b := startSolo(t, append([]string{"node", "--store", r.URL(), "--node-id", "b", "--bind", testkit.FreeAddr(t),
		"--join", a.BindAddr(), "--roles", actors.RoleRuntime, "--cluster-profile", "local", "--log-level", "warn"}, rc.Args()...)...)

	const refused = "failed TLS verification"
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		return strings.Contains(a.Logs(), refused) && strings.Contains(b.logs.String(), refused)
	}, "both nodes refuse each other's certificate")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	requireMembers(t, ctx, 1, a.URL(), "http://"+b.http)

	// No runtime member: admission finds no capacity for the run, nothing is dispatched to b.
	c := a.Client()
	id := crossNodeRun(t, ctx, c, "xnode")
	var led *httpapi.Ledger
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		l, err := c.Ledger(ctx, id)
		if err != nil {
			return false
		}
		led = l
		return slices.ContainsFunc(l.Entries, func(e httpapi.LedgerEntry) bool { return e.Kind == messages.KindAdmission })
	}, "run %s admitted", id)
	for _, e := range led.Entries {
		require.NotContains(t, []string{messages.KindDispatch, messages.KindScaleOutFulfilled}, e.Kind, "run %s: %+v", id, led.Entries)
	}
	run, err := c.GetRun(ctx, id)
	require.NoError(t, err)
	require.Contains(t, []string{messages.RunQueued, messages.RunScaleOutRequested}, run.Status)
	require.Empty(t, run.AssignedRuntimeInstanceID)
	requireMembers(t, ctx, 1, a.URL(), "http://"+b.http)

	// b's certificate does not open a's actor port, even trusting a's CA.
	cert, err := tls.LoadX509KeyPair(rc.CertFile, rc.KeyFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ca.CertFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pem))
	require.Error(t, tlsExchange(t, actorAddr(t, ctx, a), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert},
		MinVersion: tls.VersionTLS13}), "a foreign certificate opened the actor port")
}

// requireMembers checks that each node at urls lists n members.
func requireMembers(t *testing.T, ctx context.Context, n int, urls ...string) {
	t.Helper()
	for _, url := range urls {
		ml, err := membersOf(ctx, url)
		require.NoError(t, err)
		require.Len(t, ml.Members, n, "%s lists %+v", url, ml.Members)
	}
}

// membersOf reads GET /v1/cluster/members of the node at url.
func membersOf(ctx context.Context, url string) (*httpapi.MemberList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/cluster/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("members: HTTP %d: %s", resp.StatusCode, b)
	}
	var ml httpapi.MemberList
	return &ml, json.Unmarshal(b, &ml)
}

// TestSecure_duplicateNodeIDRefused: a second process started with the node id of a live
// member exits with a clear error before it serves; the first keeps serving.
func TestSecure_duplicateNodeIDRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: 1, RedisURL: r.URL(), NodeIDs: []string{"a"}})
	a := pc.Node(0)
	res := dair(t, "node", "--store", r.URL(), "--node-id", "a", "--bind", testkit.FreeAddr(t), "--join", a.BindAddr(),
		"--http", testkit.FreeAddr(t), "--cluster-profile", "local", "--log-level", "error")
	require.Equal(t, 1, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stderr, `node id "a" is already used by live member`)
	require.Contains(t, res.stderr, "start this node with another --node-id")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, a.Client().WaitReady(ctx, 20*time.Millisecond))
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
		ml, err := a.Members(ctx)
		return err == nil && len(ml.Members) == 1
	}, "the refused process left a's membership")
}

// TestCluster_pausedNodeRestartsItsMemberIDOnce: a node paused past the failure timeout and
// resumed restarts under a new member id exactly once; peers' declared-dead notices meant for
// its old incarnation (same memberlist address) must not kill the new one.
func TestCluster_pausedNodeRestartsItsMemberIDOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	pc := startCluster(t, r, 3)
	victim := pc.Node(2)
	victim.Stop()
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		return strings.Contains(pc.Node(0).Logs(), "cluster member lost")
	}, "membership declared the paused node lost")
	victim.Cont()
	const restart = "restarting under a new member id"
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		return strings.Contains(victim.Logs(), restart)
	}, "paused node restarted under a new member id")
	pc.WaitTopology(3)
	// Settled: every node lists the new incarnation; it restarted once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	self, err := victim.MemberID(ctx)
	require.NoError(t, err)
	for _, n := range pc.Nodes() {
		// A topology of three can still be the old incarnation's for a moment: wait for the new.
		testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
			ml, err := n.Members(ctx)
			return err == nil && slices.ContainsFunc(ml.Members, func(m httpapi.ClusterMember) bool { return m.ID == self })
		}, "%s lists %s", n.ID(), self)
	}
	require.Equal(t, 1, strings.Count(victim.Logs(), restart), "restarts:\n%s", victim.Logs())
}
