package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// env builds an envelope to typ/key under tenant ten ("" for none) with a deadline timeout
// from now (0: none, the RPC timeout).
func env(typ, key, ten, payload string, timeout time.Duration) *messages.MessageEnvelope {
	e := &messages.MessageEnvelope{Recipient: aid(typ, key), Payload: []byte(payload), ContentType: "application/json"}
	if ten != "" {
		e.Snapshot = tenant(ten)
	}
	if timeout > 0 {
		e.Deadline = time.Now().Add(timeout).UnixNano()
	}
	return e
}

// counts parses the counter replies of outs, failing on any other outcome.
func counts(t *testing.T, outs []*messages.DeliveryOutcome) []int {
	t.Helper()
	var cs []int
	for i, o := range outs {
		var c int
		if o.GetStatus() != messages.DeliveryOutcome_DELIVERED {
			t.Fatalf("outcome %d: %v, want delivered", i, o)
		}
		if _, err := fmt.Sscanf(string(o.Response), `{"count":%d}`, &c); err != nil {
			t.Fatalf("outcome %d: %s: %v", i, o.Response, err)
		}
		cs = append(cs, c)
	}
	return cs
}

func TestAgent_SendBatch_outcomesOnOneNode(t *testing.T) {
	n, probe := outcomeNode(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		env    *messages.MessageEnvelope
		status messages.DeliveryOutcome_Status
		code   string
		resp   string
	}{
		{"echo replies with the payload", env("echo", "k", "acme", `{"a":1}`, 0), messages.DeliveryOutcome_DELIVERED, "", `{"a":1}`},
		{"counter counts per key", env("counter", "k1", "acme", "", 0), messages.DeliveryOutcome_DELIVERED, "", `{"count":1}`},
		{"counter counts again, in batch order", env("counter", "k1", "acme", "", 0), messages.DeliveryOutcome_DELIVERED, "", `{"count":2}`},
		{"another tenant's counter is another agent", env("counter", "k1", "globex", "", 0), messages.DeliveryOutcome_DELIVERED, "", `{"count":1}`},
		{"no owner", env("nobody", "k", "acme", "", 0), messages.DeliveryOutcome_UNDELIVERABLE, agents.ReasonNoLiveOwner, ""},
		{"no tenant", env("echo", "k", "", "", 0), messages.DeliveryOutcome_UNDELIVERABLE, agents.ReasonMissingTenant, ""},
		{"cross-tenant refused", env("private", "k", "acme", "", 0), messages.DeliveryOutcome_UNDELIVERABLE, agents.ReasonTenantRefused, ""},
		{"own tenant served", env("private", "k", "globex", "", 0), messages.DeliveryOutcome_DELIVERED, "", "ok"},
		{"handler error", env("fail", "k", "acme", "x", 0), messages.DeliveryOutcome_ERROR, "", ""},
		{"handler panic", env("fail", "k", "acme", "panic", 0), messages.DeliveryOutcome_ERROR, agents.ReasonAgentPanicked, ""},
		{"the agent goes on after a panic", env("fail", "k", "acme", "x", 0), messages.DeliveryOutcome_ERROR, "", ""},
		{"deadline passes", env("silent", "k", "acme", "", 100*time.Millisecond), messages.DeliveryOutcome_TIMEOUT, agents.ReasonDeadlineExceeded, ""},
	}
	envs := make([]*messages.MessageEnvelope, len(tests))
	for i, tt := range tests {
		envs[i] = tt.env
	}
	start := time.Now()
	outs, err := n.SendAgentBatch(ctx, envs)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != len(tests) {
		t.Fatalf("%d outcomes for %d envelopes", len(outs), len(tests))
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("the batch returned after %v, want its longest deadline (100ms) and little more", d)
	}
	for i, tt := range tests {
		o := outs[i]
		if o.Status != tt.status || agents.ReasonCode(o.Reason) != tt.code || tt.resp != "" && string(o.Response) != tt.resp {
			t.Errorf("%s: outcome %v, want %v %q %s", tt.name, o, tt.status, tt.code, tt.resp)
		}
		if envs[i].Id == "" {
			t.Errorf("%s: no message id assigned", tt.name)
		}
	}
	probe.Expect().Reply(nil) // the timed-out message reached the probe; its late answer is dropped
	for _, bad := range [][]*messages.MessageEnvelope{{env("echo", "k", "acme", "", 0), nil}, {{Recipient: aid("Echo", "k")}}} {
		if outs, err := n.SendAgentBatch(ctx, bad); err == nil {
			t.Errorf("SendAgentBatch(%v) = %v, want an error", bad, outs)
		}
	}
	if o, err := n.SendAgent(ctx, aid("echo", "k"), nil, tenant("acme"), 0); err != nil || o.Status != messages.DeliveryOutcome_DELIVERED {
		t.Fatalf("a send after the refused batches: %v %v", o, err)
	}
	if outs, err := n.SendAgentBatch(ctx, nil); err != nil || len(outs) != 0 {
		t.Fatalf("empty batch: %v %v", outs, err)
	}
}

func TestAgent_SendBatch_perAgentOrderUnderConcurrentBatches(t *testing.T) {
	n := agentNode(t, agents.Config{})
	ctx := context.Background()
	const senders, batches, each = 4, 20, 25
	got := make([][]int, senders)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range batches {
				envs := make([]*messages.MessageEnvelope, 0, 2*each)
				for i := range each { // the shared agent interleaved with one of the sender's own
					envs = append(envs, env("counter", "shared", "acme", "", 10*time.Second),
						env("counter", fmt.Sprintf("own-%d-%d", s, i%3), "acme", "", 10*time.Second))
				}
				outs, err := n.SendAgentBatch(ctx, envs)
				if err != nil {
					errs <- err
					return
				}
				for i := 0; i < len(outs); i += 2 {
					var c int
					if _, err := fmt.Sscanf(string(outs[i].GetResponse()), `{"count":%d}`, &c); err != nil {
						errs <- fmt.Errorf("sender %d: outcome %v", s, outs[i])
						return
					}
					got[s] = append(got[s], c)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []int
	for s, cs := range got {
		if !slices.IsSorted(cs) {
			t.Fatalf("sender %d saw the shared counter out of order: %v", s, cs)
		}
		all = append(all, cs...)
	}
	slices.Sort(all)
	for i, c := range all {
		if c != i+1 {
			t.Fatalf("counts are not 1..%d: position %d holds %d", senders*batches*each, i, c)
		}
	}
	outs, err := n.SendAgentBatch(ctx, []*messages.MessageEnvelope{env("counter", "own-0-0", "acme", "", 0), env("counter", "own-0-0", "acme", "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if cs := counts(t, outs); cs[0] != batches*((each+2)/3)+1 || cs[1] != cs[0]+1 { // i%3 == 0 for (each+2)/3 of each
		t.Fatalf("own counter after the batches: %v", cs)
	}
}

func TestAgent_SendBatch_timeoutAndContext(t *testing.T) {
	n := agentNode(t, agents.Config{})
	probe := testkit.NewAgentProbe(t, "probe", []*actors.Node{n})
	ctx := context.Background()
	// A held agent times out its message at its deadline; the others are answered meanwhile,
	// and the message queued behind the held one on the same agent, whose deadline is earlier,
	// times out at its own deadline and is not handled.
	start := time.Now()
	res := make(chan []*messages.DeliveryOutcome, 1)
	go func() {
		outs, err := n.SendAgentBatch(ctx, []*messages.MessageEnvelope{
			env("probe", "held", "acme", "1", 300*time.Millisecond),
			env("echo", "k", "acme", `"fast"`, time.Second),
			env("probe", "held", "acme", "2", 150*time.Millisecond),
		})
		if err != nil {
			outs = []*messages.DeliveryOutcome{agents.Failed(err.Error(), "")}
		}
		res <- outs
	}()
	held := probe.Expect()
	outs := <-res
	if len(outs) != 3 {
		t.Fatalf("outcomes %v", outs)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("the batch returned after %v, before its last deadline", d)
	}
	if outs[0].Status != messages.DeliveryOutcome_TIMEOUT || outs[2].Status != messages.DeliveryOutcome_TIMEOUT ||
		outs[1].Status != messages.DeliveryOutcome_DELIVERED || string(outs[1].Response) != `"fast"` {
		t.Fatalf("outcomes %v, want timeout, delivered, timeout", outs)
	}
	held.Reply(nil)
	probe.ExpectNone(100 * time.Millisecond) // "2" waited past its deadline: not handled
	// An expired ctx gives TIMEOUT; a cancelled one, its error.
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	outs, err := n.SendAgentBatch(tctx, []*messages.MessageEnvelope{env("probe", "a", "acme", "", 10*time.Second), env("echo", "k", "acme", "1", 0)})
	if err != nil || outs[0].Status != messages.DeliveryOutcome_TIMEOUT || outs[1].Status != messages.DeliveryOutcome_DELIVERED {
		t.Fatalf("batch with an expiring ctx: %v %v", outs, err)
	}
	probe.Expect().Reply(nil)
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := n.SendAgentBatch(cctx, []*messages.MessageEnvelope{env("probe", "b", "acme", "", 10*time.Second)})
		errc <- err
	}()
	call := probe.Expect()
	ccancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled batch: %v", err)
	}
	call.Reply(nil)
}

func TestAgent_SendBatch_stopFailsPending(t *testing.T) {
	n, err := actors.Start(context.Background(), actors.Config{NodeID: "batch-stop", Store: testkit.OpenStore(t, testkit.BackendEmbedded, nil),
		Roles: []string{actors.RoleRuntime}})
	if err != nil {
		t.Fatal(err)
	}
	probe := testkit.NewAgentProbe(t, "probe", []*actors.Node{n})
	res := make(chan []*messages.DeliveryOutcome, 1)
	go func() {
		outs, err := n.SendAgentBatch(context.Background(), []*messages.MessageEnvelope{env("probe", "k", "acme", "", 30*time.Second)})
		if err != nil {
			outs = []*messages.DeliveryOutcome{agents.Failed(err.Error(), "")}
		}
		res <- outs
	}()
	call := probe.Expect() // never answered before the stop
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := n.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v", err)
	}
	if outs := <-res; outs[0].Status != messages.DeliveryOutcome_UNDELIVERABLE || agents.ReasonCode(outs[0].Reason) != agents.ReasonStopping {
		t.Fatalf("pending batch after a timed-out drain: %v", outs)
	}
	call.Reply(nil)
	outs, err := n.SendAgentBatch(context.Background(), []*messages.MessageEnvelope{env("probe", "k", "acme", "", 0)})
	if err != nil || agents.ReasonCode(outs[0].Reason) != agents.ReasonStopping {
		t.Fatalf("batch after stop: %v %v", outs, err)
	}
}

func TestAgentCluster_SendBatch_outcomesOrderAndOneRequestPerWorker(t *testing.T) {
	c := startPeerCluster(t,
		peerConfig{ID: "n1"},
		peerConfig{ID: "n2", Types: []string{"echo", "counter"}, TestTypes: []string{"hang", "fail"}},
		peerConfig{ID: "n3", TestTypes: []string{"private"}})
	n1, n2, n3 := c.peers[0], c.peers[1], c.peers[2]
	type want struct{ status, code, worker, resp string }
	var batch []peerRequest
	var wants []want
	add := func(q peerRequest, w want) {
		if q.TimeoutMS == 0 {
			q.TimeoutMS = 10_000
		}
		batch = append(batch, q)
		wants = append(wants, w)
	}
	add(peerRequest{Type: "echo", Key: "k1", Tenant: "acme", Payload: `{"hi":1}`}, want{"delivered", "", n2.member, `{"hi":1}`})
	for i := 1; i <= 20; i++ { // two counters interleaved: each counts in batch order
		add(peerRequest{Type: "counter", Key: "c", Tenant: "acme"}, want{"delivered", "", n2.member, fmt.Sprintf(`{"count":%d}`, i)})
		add(peerRequest{Type: "counter", Key: "d", Tenant: "acme"}, want{"delivered", "", n2.member, fmt.Sprintf(`{"count":%d}`, i)})
	}
	add(peerRequest{Type: "hang", Key: "k", Tenant: "acme", TimeoutMS: 300}, want{"timeout", agents.ReasonDeadlineExceeded, n2.member, ""})
	add(peerRequest{Type: "fail", Key: "k", Tenant: "acme", Payload: `"x"`}, want{"error", "", n2.member, ""})
	add(peerRequest{Type: "fail", Key: "k", Tenant: "acme", Payload: `"panic"`}, want{"error", agents.ReasonAgentPanicked, n2.member, ""})
	add(peerRequest{Type: "private", Key: "k", Tenant: "acme"}, want{"undeliverable", agents.ReasonTenantRefused, "", ""})
	add(peerRequest{Type: "private", Key: "k", Tenant: "globex"}, want{"delivered", "", n3.member, `"globex"`})
	add(peerRequest{Type: "nobody", Key: "k", Tenant: "acme"}, want{"undeliverable", agents.ReasonNoLiveOwner, "", ""})
	add(peerRequest{Type: "echo", Key: "k"}, want{"undeliverable", agents.ReasonMissingTenant, "", ""})
	before := sendBatchesByWorker(t, n1)
	start := time.Now()
	r := must(t, n1.call(peerRequest{Op: "sendbatch", Batch: batch}))
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("the batch took %v, want its longest deadline (300ms) and little more", d)
	}
	if len(r.Outcomes) != len(wants) {
		t.Fatalf("%d outcomes for %d envelopes", len(r.Outcomes), len(wants))
	}
	for i, w := range wants {
		o := r.Outcomes[i]
		if o.Status != w.status || agents.ReasonCode(o.Reason) != w.code || w.worker != "" && o.Worker != w.worker ||
			w.resp != "" && o.Response != w.resp {
			t.Errorf("envelope %d (%s/%s): outcome %+v, want %+v", i, batch[i].Type, batch[i].Key, o, w)
		}
	}
	after := sendBatchesByWorker(t, n1)
	for _, w := range []*agentPeer{n2, n3} {
		if got := after[w.member] - before[w.member]; got != 1 {
			t.Errorf("worker %s got %d send requests for the batch, want 1", w.cfg.ID, got)
		}
	}
}

// sendBatchesByWorker returns the send requests p's router sent each worker.
func sendBatchesByWorker(t *testing.T, p *agentPeer) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, w := range must(t, p.call(peerRequest{Op: "directory"})).Directory.Workers {
		out[w.ID] = w.SendBatches
	}
	return out
}

// TestAgentCluster_SendBatch_slowAgentDoesNotHoldOthers: the worker holds the outcomes of
// requests of several deliveries while more are being handled, but a held agent must not hold
// the others' outcomes until its deadline.
func TestAgentCluster_SendBatch_slowAgentDoesNotHoldOthers(t *testing.T) {
	c := startPeerCluster(t, peerConfig{ID: "n1"}, peerConfig{ID: "n2", Types: []string{"echo"}, TestTypes: []string{"hang"}})
	n1 := c.peers[0]
	slow := n1.start(peerRequest{Op: "sendbatch", Batch: []peerRequest{
		{Type: "hang", Key: "k", Tenant: "acme", TimeoutMS: 3000},
		{Type: "echo", Key: "a", Tenant: "acme", Payload: `1`, TimeoutMS: 10_000},
	}})
	start := time.Now()
	r := must(t, n1.call(peerRequest{Op: "sendbatch", Batch: []peerRequest{
		{Type: "echo", Key: "b", Tenant: "acme", Payload: `2`, TimeoutMS: 10_000},
		{Type: "echo", Key: "c", Tenant: "acme", Payload: `3`, TimeoutMS: 10_000},
	}}))
	if d := time.Since(start); d > time.Second || r.Outcomes[0].Response != "2" || r.Outcomes[1].Response != "3" {
		t.Fatalf("a batch beside a held agent: %+v %+v after %v", r.Outcomes[0], r.Outcomes[1], d)
	}
	r = must(t, n1.await(slow))
	if r.Outcomes[0].Status != "timeout" || r.Outcomes[1].Response != "1" {
		t.Fatalf("the batch with the held agent: %+v %+v", r.Outcomes[0], r.Outcomes[1])
	}
}

// TestAgent_PublishBatch_bothWireForms: a worker takes a publish batch as envelopes naming
// their recipients (routers that do not know its registration yet, older routers) and as the
// envelope once with its recipients.
func TestAgent_PublishBatch_bothWireForms(t *testing.T) {
	n := agentNode(t, agents.Config{})
	sys := n.System()
	worker := actor.NewPID(sys.Address(), "agents-"+n.ID()+"/worker")
	pub := &messages.MessageEnvelope{Id: "p1", Topic: &messages.TopicId{Type: "t"}, Snapshot: tenant("acme")}
	forms := []*messages.AgentPublishBatch{
		{RouterId: "test", Session: 1, Envelopes: []*messages.MessageEnvelope{
			{Id: "p0", Recipient: aid("counter", "k1"), Topic: pub.Topic, Snapshot: pub.Snapshot},
			{Id: "p0", Recipient: aid("counter", "k2"), Topic: pub.Topic, Snapshot: pub.Snapshot}}},
		{RouterId: "test", Session: 2, Envelope: pub, Recipients: []*messages.AgentId{aid("counter", "k1"), aid("counter", "k3"), aid("nobody", "k")}},
	}
	for i, b := range forms {
		res, err := sys.Root.RequestFuture(worker, b, 10*time.Second).Result()
		ack, ok := res.(*messages.AgentPublishAck)
		if err != nil || !ok || ack.Session != b.Session || ack.Accepted != 2 {
			t.Fatalf("form %d: ack %v, %v; want 2 accepted", i, res, err)
		}
	}
	ctx := context.Background()
	for key, want := range map[string]string{"k1": `{"count":3}`, "k2": `{"count":2}`, "k3": `{"count":2}`} {
		if o, err := n.SendAgent(ctx, aid("counter", key), nil, tenant("acme"), 0); err != nil || string(o.Response) != want {
			t.Errorf("counter %s = %v, %v; want %s", key, o, err, want)
		}
	}
}

// TestAgentCluster_SendBatch_largePayloadsAreSplitNotLost: requests to a worker are bounded by
// the payload bytes they carry, and the actor port takes what its peers send. A burst of 400 KB
// messages used to go out as one request of several MiB, past gRPC's 4 MiB default: the stream
// broke and every message of the request timed out.
func TestAgentCluster_SendBatch_largePayloadsAreSplitNotLost(t *testing.T) {
	c := startPeerCluster(t, peerConfig{ID: "n1"}, peerConfig{ID: "n2", Types: []string{"echo"}})
	n1, n2 := c.peers[0], c.peers[1]
	const count, size = 24, 400 << 10
	var batch []peerRequest
	for i := range count {
		payload := `"` + strings.Repeat(string(rune('a'+i%26)), size) + `"`
		batch = append(batch, peerRequest{Type: "echo", Key: fmt.Sprint("big", i), Tenant: "acme", Payload: payload, TimeoutMS: 20_000})
	}
	before := sendBatchesByWorker(t, n1)[n2.member]
	r := must(t, n1.call(peerRequest{Op: "sendbatch", Batch: batch}))
	if len(r.Outcomes) != count {
		t.Fatalf("%d outcomes for %d envelopes", len(r.Outcomes), count)
	}
	for i, o := range r.Outcomes {
		if o.Status != "delivered" || o.Response != batch[i].Payload {
			t.Fatalf("envelope %d: %s %s (%d response bytes)", i, o.Status, o.Reason, len(o.Response))
		}
	}
	// 9.6 MB of payloads, in requests of at most agents.DefaultMaxBatchBytes and one payload.
	if sent := sendBatchesByWorker(t, n1)[n2.member] - before; sent < uint64(count*size/(agents.DefaultMaxBatchBytes+size)) {
		t.Fatalf("%d requests carried %d bytes of payloads", sent, count*size)
	}
}
