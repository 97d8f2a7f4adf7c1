package actors

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// TestAgentRouter_restartFailsTheSendsItTookAndDidNotRoute: the router takes every send queued
// in the intake at once; when it crashes routing the first, the ones it took after it are not
// in the intake any more, and the restarted router never sees them: they are answered
// UNDELIVERABLE (stopping) at the restart instead of leaving their callers until the deadline.
func TestAgentRouter_restartFailsTheSendsItTookAndDidNotRoute(t *testing.T) {
	testHookRouteSend = func(m *agentRouteSend) {
		if m.env.GetRecipient().GetKey() == "poison" {
			panic("injected router crash")
		}
	}
	t.Cleanup(func() { testHookRouteSend = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(ctx, Config{NodeID: "n1", Store: st, AgentTypes: []string{AgentEcho}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	rt := n.agents
	var dones []chan *messages.DeliveryOutcome
	for _, key := range []string{"poison", "a", "b"} {
		done := make(chan *messages.DeliveryOutcome, 1)
		env := &messages.MessageEnvelope{Recipient: &messages.AgentId{Type: AgentEcho, Key: key}, Payload: []byte(`{}`),
			Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}, Deadline: time.Now().Add(time.Minute).UnixNano()}
		rt.sends.push(agentRouteSend{env: env, tenant: "acme", done: done}) // no wake-up yet: one take gets all three
		dones = append(dones, done)
	}
	rt.system.Root.Send(rt.router, agentSendsQueued{})
	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	for i, done := range dones[1:] {
		select {
		case o := <-done:
			if o.Status != messages.DeliveryOutcome_UNDELIVERABLE || agents.ReasonCode(o.Reason) != agents.ReasonStopping {
				t.Fatalf("send %d taken with the crashing one: %v, want UNDELIVERABLE (stopping)", i+1, o)
			}
		case <-wait.Done():
			t.Fatalf("send %d taken with the crashing one was not answered (its deadline is a minute away)", i+1)
		}
	}
}
