package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// agentFlow sends to the counter of .input.key (retrying a failed send), then publishes to
// orders.created/<key>, which the nodes' --agent-subscription routes to that same counter.
const agentFlow = `key: agent-flow
steps:
  - id: ask
    uses: agent.send
    with: {agent: "counter/{{ .input.key }}", message: {from: "{{ .tenant_id }}"}, timeout: 10s}
    retry: {max_attempts: 3, backoff: 200ms}
  - id: tell
    uses: agent.publish
    needs: [ask]
    with: {topic: "orders.created/{{ .input.key }}", message: {after: "{{ .steps.ask.output.count }}"}}
    retry: {max_attempts: 3, backoff: 200ms}
`

// devToken mints an HS256 token for the dev node's secret.
func devToken(t *testing.T, secret []byte, tenant, role string) string {
	t.Helper()
	tok, err := auth.MintHS256(secret, auth.Claims{TenantID: tenant, Subject: "u-" + tenant, Roles: []string{role},
		ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	return tok
}

// TestDair_Agents_devCLI: `dair dev --auth jwt --agents echo,counter` with a subscription,
// driven by `dair agents list|send|publish` and a pipeline using agent.send and agent.publish.
// A tenant token reaches only its tenant's agents: naming another tenant is refused (403,
// exit 1) and the same agent id under another tenant is another agent.
func TestDair_Agents_devCLI(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("agents-cli-secret-0123456789abcdef")
	secretFile := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secretFile, secret, 0o600))
	n := startDev(t, filepath.Join(dir, "data"), "", "--auth", "jwt", "--jwt-secret-file", secretFile,
		"--agents", "echo,counter", "--agent-subscription", "acme:orders.*=counter")
	acme, globex := devToken(t, secret, "acme", auth.RoleTenant), devToken(t, secret, "globex", auth.RoleTenant)
	admin := devToken(t, secret, "ops", auth.RoleAdmin)
	as := func(tok string, args ...string) result {
		t.Helper()
		return dair(t, append([]string{"--server", n.url, "--token", tok}, args...)...)
	}
	ok := func(r result, want string) {
		t.Helper()
		require.Equal(t, 0, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
		require.Contains(t, r.stdout, want)
	}

	ok(as(acme, "agents", "list"), "counter")
	var l httpapi.AgentList
	r := as(admin, "agents", "list", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &l))
	require.Len(t, l.Agents, 2)
	require.Len(t, l.Workers, 1)
	require.Equal(t, 1, l.Workers[0].Subscriptions)

	ok(as(acme, "agents", "send", "echo/k1", "--message", `{"hi":1}`), `delivered: {"hi":1}`)
	ok(as(acme, "agents", "send", "counter/c1", "--message", `1`), `delivered: {"count":1}`)
	ok(as(acme, "agents", "send", "counter/c1", "--message", `1`, "--timeout", "5s"), `delivered: {"count":2}`)
	r = as(acme, "agents", "send", "nosuch/k", "--message", `1`)
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stdout, "undeliverable: no-live-owner")

	// Cross-tenant: refused with 403; globex's counter/c1 is its own agent.
	r = as(acme, "agents", "send", "counter/c1", "--tenant", "globex", "--message", `1`)
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stderr, "forbidden")
	require.Contains(t, r.stderr, "403")
	ok(as(globex, "agents", "send", "counter/c1", "--message", `1`), `delivered: {"count":1}`)

	ok(as(acme, "agents", "publish", "orders.created/c1", "--message", `{"id":7}`), "1 delivery")
	ok(as(globex, "agents", "publish", "orders.created/c1", "--message", `{"id":7}`), "0 deliveries")
	var o httpapi.AgentSendResponse
	r = as(acme, "agents", "send", "counter/c1", "--message", `1`, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &o))
	require.JSONEq(t, `{"count":4}`, string(o.Response), "two sends, the publish, this send")

	for _, args := range [][]string{
		{"agents", "send", "echo", "--message", "1"},
		{"agents", "send", "echo/k"},
		{"agents", "send", "echo/k", "--message", "nope"},
		{"agents", "publish", "/src", "--message", "1"},
		{"agents", "send", "echo/k", "--message", "1", "--timeout", "soon"},
	} {
		require.Equal(t, 2, as(acme, args...).code, "%v", args)
	}
	for _, flags := range [][]string{{"--agents", "llm"}, {"--agent-subscription", "acme:orders"}, {"--agent-rpc-timeout", "-1s"}} {
		r := dair(t, append([]string{"dev", "--data", filepath.Join(dir, "bad"), "--http", "127.0.0.1:0"}, flags...)...)
		require.Equal(t, 2, r.code, "dev %v: %s", flags, r.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.New(n.url, admin).PutPipeline(ctx, "agent-flow", []byte(agentFlow))
	require.NoError(t, err)
	ok(as(acme, "submit", "agent-flow", "--input", `{"key":"p1"}`, "--wait"), "succeeded")
}

// agentCluster wraps a process cluster's HTTP clients for the agent tests.
type agentCluster struct {
	t   *testing.T
	ctx context.Context
}

// send sends message 1 to typ/key as acme through c.
func (a agentCluster) send(c *client.Client, typ, key, timeout string) httpapi.AgentSendResponse {
	a.t.Helper()
	o, err := c.SendAgent(a.ctx, typ, key, httpapi.AgentSendRequest{TenantID: "acme", Message: json.RawMessage(`1`), Timeout: timeout})
	require.NoError(a.t, err)
	return *o
}

// list returns c's router's view (auth none: the operator view).
func (a agentCluster) list(c *client.Client) *httpapi.AgentList {
	a.t.Helper()
	l, err := c.ListAgents(a.ctx)
	require.NoError(a.t, err)
	return l
}

// nodeOf maps worker ids to node ids in c's view.
func (a agentCluster) nodeOf(c *client.Client) map[string]string {
	out := map[string]string{}
	for _, w := range a.list(c).Workers {
		out[w.WorkerID] = w.NodeID
	}
	return out
}

// waitOwners waits until c's router lists exactly the nodes (sorted) as the owners of typ.
func (a agentCluster) waitOwners(c *client.Client, typ string, nodes ...string) {
	a.t.Helper()
	want := strings.Join(nodes, ",")
	testkit.EventuallyErr(a.t, 30*time.Second, func() error {
		for _, ty := range a.list(c).Agents {
			if ty.Type != typ {
				continue
			}
			if got := slices.Sorted(slices.Values(ty.OwnerNodes)); strings.Join(got, ",") == want {
				return nil
			}
			return fmt.Errorf("owners of %s: %v, want %s", typ, ty.OwnerNodes, want)
		}
		return fmt.Errorf("no type %s", typ)
	})
}

// keysOn sends typ/<prefix><i> for i < n through c and returns the keys placed on node.
func (a agentCluster) keysOn(c *client.Client, typ, prefix string, n int, node string) []string {
	a.t.Helper()
	nodeOf := a.nodeOf(c)
	var out []string
	for i := range n {
		k := prefix + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		o := a.send(c, typ, k, "5s")
		require.Equal(a.t, httpapi.OutcomeDelivered, o.Outcome, "%s/%s: %+v", typ, k, o)
		if nodeOf[o.WorkerID] == node {
			out = append(out, k)
		}
	}
	return out
}

// waitRun polls a run until it is final.
func (a agentCluster) waitRun(c *client.Client, id string) *httpapi.Run {
	a.t.Helper()
	var run *httpapi.Run
	testkit.Eventually(a.t, 60*time.Second, 50*time.Millisecond, func() bool {
		r, err := c.GetRun(a.ctx, id)
		require.NoError(a.t, err)
		run = r
		return messages.IsTerminalRun(r.Status)
	}, "run %s not final", id)
	return run
}

// TestDair_Agents_clusterKills: three `dair node` processes on one Redis (lan membership, so
// the agent health probes, every 2s with threshold 2, are what notices a frozen worker). n1
// runs the pipelines and routes the test's sends and owns echo; n2 and n3 (control-plane only,
// so no run executes there) own echo and counter. Over HTTP, in order:
//
//  1. a send to a SIGSTOPped worker times out; five more stay pending there; kill -9 of the
//     worker resolves them all undeliverable (worker-evicted) within the health bound, its keys
//     move to n3 and new sends succeed;
//  2. with n2 restarted and frozen again, a run's agent.send step goes pending on it; kill -9
//     fails that attempt (undeliverable) and the retry policy delivers it on n3; agent.publish
//     reaches the subscribed counter; the run succeeds;
//  3. kill -9 of the routing node n1: sends through n3 resume, echo keys n1 owned included.
func TestDair_Agents_clusterKills(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const health = 2 * time.Second
	bound := agents.Config{HealthInterval: health, FailureThreshold: 2, RPCTimeout: 10 * time.Second}.EvictionBound()
	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: dairBin, N: 3, RedisURL: r.URL(), Profile: "lan",
		Roles: [][]string{nil, {"control-plane"}, {"control-plane"}},
		ExtraArgs: []string{"--agent-health-interval", health.String(), "--agent-failure-threshold", "2", "--agent-rpc-timeout", "10s",
			"--agent-subscription", "acme:orders.*=counter"},
		NodeArgs: [][]string{{"--agents", "echo"}, {"--agents", "echo,counter"}, {"--agents", "echo,counter"}}})
	pc.WaitTopology(3)
	a := agentCluster{t: t, ctx: ctx}
	c1 := pc.Node(0).Client()
	a.waitOwners(c1, "counter", "n2", "n3")
	a.waitOwners(c1, "echo", "n1", "n2", "n3")
	_, err := c1.PutPipeline(ctx, "agent-flow", []byte(agentFlow))
	require.NoError(t, err)
	warm := a.waitRun(c1, a.submit(c1, "warm"))
	require.Equal(t, messages.RunSucceeded, warm.Status, warm.FailureReason)

	agentsWorkerKilled(t, a, pc, bound)
	agentsPipelineSurvivesKill(t, a, pc)
	agentsRouterKilled(t, a, pc)
}

// agentsWorkerKilled: a send to a frozen worker times out; five more stay pending; kill -9
// resolves them undeliverable (worker-evicted) within bound; the keys move to n3.
func agentsWorkerKilled(t *testing.T, a agentCluster, pc *testkit.ProcessCluster, bound time.Duration) {
	c1, n2 := pc.Node(0).Client(), pc.Node(1)
	ctx := a.ctx
	victimKeys := a.keysOn(c1, "counter", "k", 40, "n2")
	require.GreaterOrEqual(t, len(victimKeys), 6, "keys on n2: %v", victimKeys)
	n2.Stop()
	o := a.send(c1, "counter", victimKeys[0], "300ms")
	require.Equal(t, httpapi.OutcomeTimeout, o.Outcome, "%+v", o)
	require.Equal(t, "deadline-exceeded", o.ReasonCode)
	pending := make(chan httpapi.AgentSendResponse, 5)
	for _, k := range victimKeys[1:6] {
		go func() {
			o, err := c1.SendAgent(ctx, "counter", k, httpapi.AgentSendRequest{TenantID: "acme", Message: json.RawMessage(`1`), Timeout: "20s"})
			if err != nil {
				o = &httpapi.AgentSendResponse{Outcome: "client error", Reason: err.Error()}
			}
			pending <- *o
		}()
	}
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return pendingSends(a.list(c1)) >= 5 },
		"five sends pending on the frozen worker")
	n2.Kill()
	killed := time.Now()
	for range 5 {
		o := <-pending
		require.Equal(t, httpapi.OutcomeUndeliverable, o.Outcome, "%+v", o)
		require.Equal(t, "worker-evicted", o.ReasonCode, "%+v", o)
	}
	resolved := time.Since(killed)
	t.Logf("5 pending sends resolved undeliverable %v after kill -9 (health bound %v)", resolved.Round(time.Millisecond), bound)
	require.LessOrEqual(t, resolved, bound)
	nodeOf := a.nodeOf(c1)
	for _, k := range victimKeys {
		o := a.send(c1, "counter", k, "5s")
		require.Equal(t, httpapi.OutcomeDelivered, o.Outcome, "%s: %+v", k, o)
		require.Equal(t, "n3", nodeOf[o.WorkerID], "key %s moved to n3", k)
	}
}

// agentsPipelineSurvivesKill: a run's agent.send pending on a frozen worker fails when it is
// killed (undeliverable) and the retry delivers it on the key's new owner; agent.publish
// reaches the subscribed counter.
func agentsPipelineSurvivesKill(t *testing.T, a agentCluster, pc *testkit.ProcessCluster) {
	c1, n2 := pc.Node(0).Client(), pc.Node(1)
	ctx := a.ctx
	n2.Restart()
	a.waitOwners(c1, "counter", "n2", "n3")
	keys := a.keysOn(c1, "counter", "p", 20, "n2")
	require.NotEmpty(t, keys)
	n2.Stop()
	id := a.submit(c1, keys[0])
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return pendingSends(a.list(c1)) >= 1 },
		"the run's agent.send pending on the frozen worker")
	n2.Kill()
	run := a.waitRun(c1, id)
	require.Equal(t, messages.RunSucceeded, run.Status, run.FailureReason)
	steps := map[string]httpapi.Step{}
	for _, s := range run.Steps {
		steps[s.ID] = s
	}
	require.EqualValues(t, 2, steps["ask"].Attempts, "ask: %+v", steps["ask"])
	require.JSONEq(t, `{"count":1}`, string(steps["ask"].Output), "the retry reached the key's new owner")
	require.JSONEq(t, `{"deliveries":1}`, string(steps["tell"].Output))
	led, err := c1.Ledger(ctx, run.ExecutionID)
	require.NoError(t, err)
	var failed []string
	for _, e := range led.Entries {
		if e.Kind == messages.KindStepFailed {
			failed = append(failed, e.Reason)
		}
	}
	require.Len(t, failed, 1)
	require.Contains(t, failed[0], "undeliverable")
	o := a.send(c1, "counter", keys[0], "5s")
	require.JSONEq(t, `{"count":3}`, string(o.Response), "the step's send, the publish, this send")
}

// agentsRouterKilled: after kill -9 of the routing node n1, sends through n3 resume, the
// echo keys n1 owned included.
func agentsRouterKilled(t *testing.T, a agentCluster, pc *testkit.ProcessCluster) {
	c1, c3, n1 := pc.Node(0).Client(), pc.Node(2).Client(), pc.Node(0)
	onN1 := a.keysOn(c1, "echo", "e", 20, "n1")
	require.NotEmpty(t, onN1)
	n1.Kill()
	killed := time.Now()
	testkit.EventuallyErr(t, 30*time.Second, func() error {
		nodeOf := a.nodeOf(c3)
		for _, k := range onN1 {
			o := a.send(c3, "echo", k, "2s")
			if o.Outcome != httpapi.OutcomeDelivered || nodeOf[o.WorkerID] != "n3" {
				return fmt.Errorf("echo/%s through n3: %+v", k, o)
			}
		}
		return nil
	})
	t.Logf("sends through n3 resumed %v after kill -9 of the routing node", time.Since(killed).Round(time.Millisecond))
}

// submit submits agent-flow for key as acme through c and returns the run id.
func (a agentCluster) submit(c *client.Client, key string) string {
	a.t.Helper()
	sub, err := c.Submit(a.ctx, httpapi.SubmitRequest{Pipeline: "agent-flow", TenantID: "acme", Input: json.RawMessage(`{"key":"` + key + `"}`)})
	require.NoError(a.t, err)
	return sub.SharedRunID
}

// pendingSends is an operator's agent list's pending sends (-1 when the list has none).
func pendingSends(l *httpapi.AgentList) int {
	if l.PendingSessions == nil {
		return -1
	}
	return *l.PendingSessions
}
