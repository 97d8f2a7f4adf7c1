package actors_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

func TestAgent_Stop_ordered_drainsQueuedWorkAndRefusesNew(t *testing.T) {
	n := agentNode(t, agents.Config{})
	probe := testkit.NewAgentProbe(t, "probe", []*actors.Node{n})
	ctx := context.Background()
	type result struct {
		o   *messages.DeliveryOutcome
		err error
	}
	results := make(chan result, 2)
	for _, p := range []string{"m1", "m2"} { // m2 queues behind m1 on the same agent
		go func() {
			o, err := n.SendAgent(ctx, aid("probe", "k"), []byte(p), tenant("acme"), 20*time.Second)
			results <- result{o, err}
		}()
		if p == "m1" {
			probe.Expect().Reply([]byte("r1"))
			<-results
			go func() {
				o, err := n.SendAgent(ctx, aid("probe", "k"), []byte("m1b"), tenant("acme"), 20*time.Second)
				results <- result{o, err}
			}()
		}
	}
	held := probe.Expect() // m1b or m2: held while the node stops; the other is queued
	// Both sends must be pending before the stop begins: a send that has not reached the
	// router yet is refused by the stop, which is another test's case.
	testkit.EventuallyErr(t, 10*time.Second, func() error {
		if k := actors.AgentCallsInFlight(n); k < 2 {
			return fmt.Errorf("%d sends in flight, want 2", k)
		}
		return nil
	})
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop(context.Background()) }()
	testkit.EventuallyErr(t, 5*time.Second, func() error {
		o, err := n.SendAgent(ctx, aid("echo", "k"), nil, tenant("acme"), time.Second)
		if err != nil || o.Status != messages.DeliveryOutcome_UNDELIVERABLE || agents.ReasonCode(o.Reason) != agents.ReasonStopping {
			return errors.New("a new send during the stop is not refused")
		}
		return nil
	})
	if _, err := n.PublishAgent(ctx, &messages.TopicId{Type: "t"}, nil, tenant("acme")); !errors.Is(err, actors.ErrAgentsStopped) {
		t.Fatalf("publish during the stop: %v", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while an agent still held queued work", err)
	case <-time.After(100 * time.Millisecond):
	}
	held.Reply([]byte("r"))
	probe.Expect().Reply([]byte("r"))
	for range 2 {
		if r := <-results; r.err != nil || r.o.Status != messages.DeliveryOutcome_DELIVERED {
			t.Fatalf("queued send during the stop: %v %v, want delivered", r.o, r.err)
		}
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := n.RegisterAgentType(ctx, "late", func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
		return nil, nil
	}); !errors.Is(err, actors.ErrAgentsStopped) {
		t.Fatalf("register after stop: %v", err)
	}
}

func TestAgent_Stop_failsPendingWorkWhenTheDrainTimesOut(t *testing.T) {
	n, err := actors.Start(context.Background(), actors.Config{NodeID: "drain-timeout", Store: testkit.OpenStore(t, testkit.BackendEmbedded, nil),
		Roles: []string{actors.RoleRuntime}})
	if err != nil {
		t.Fatal(err)
	}
	probe := testkit.NewAgentProbe(t, "probe", []*actors.Node{n})
	res := make(chan *messages.DeliveryOutcome, 1)
	go func() {
		o, err := n.SendAgent(context.Background(), aid("probe", "k"), nil, tenant("acme"), 30*time.Second)
		if err != nil {
			o = agents.Failed(err.Error(), "")
		}
		res <- o
	}()
	call := probe.Expect() // never answered before the stop
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := n.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v", err) // the rest of the node may find its time ran out too
	}
	o := <-res
	if o.Status != messages.DeliveryOutcome_UNDELIVERABLE || agents.ReasonCode(o.Reason) != agents.ReasonStopping {
		t.Fatalf("pending send after a timed-out drain: %v", o)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("Stop took %v: the held handler was not cancelled", time.Since(start))
	}
	call.Reply(nil)
}

// TestAgentCluster_Stop_deadPeerDoesNotHoldTheStop: a member killed just before another one
// stops is still listed (failure detection has not run yet) and never acknowledges the
// departure announcement; the stop must not wait for it (it used to wait ~10 s, protoactor's
// connect retries, which kept process hosts alive long after their control plane was killed).
func TestAgentCluster_Stop_deadPeerDoesNotHoldTheStop(t *testing.T) {
	c := startPeerCluster(t, peerConfig{ID: "n1"}, peerConfig{ID: "n2"}, peerConfig{ID: "n3"})
	c.kill(c.peers[0])
	start := time.Now()
	must(t, c.peers[1].call(peerRequest{Op: "stop", TimeoutMS: 20000}))
	took := time.Since(start)
	c.dead[c.peers[1]] = true
	t.Logf("stop with a dead, still listed peer took %s", took.Round(time.Millisecond))
	if took > 6*time.Second {
		t.Fatalf("stop took %s: it waited for the dead peer", took)
	}
}
