package actors_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

// A node owning the built-in counter and a Go agent type; send to them, subscribe, publish.
func ExampleNode_SendAgent() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dair-agents-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(dir, "dair.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	node, err := actors.Start(ctx, actors.Config{Store: st, Roles: []string{actors.RoleRuntime}, AgentTypes: []string{actors.AgentCounter}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Stop(ctx)

	shout := func(_ context.Context, a *actors.Agent, env *messages.MessageEnvelope) ([]byte, error) {
		return []byte(strings.ToUpper(string(env.Payload)) + " from " + a.ID().Key), nil
	}
	if err := node.RegisterAgentType(ctx, "shout", shout); err != nil {
		fmt.Println(err)
		return
	}
	acme := &messages.ExecutionContextSnapshot{TenantId: "acme"}
	send := func(typ, key, payload string) *messages.DeliveryOutcome {
		o, err := node.SendAgent(ctx, &messages.AgentId{Type: typ, Key: key}, []byte(payload), acme, time.Second)
		if err != nil {
			return agents.Failed(err.Error(), "")
		}
		return o
	}
	o := send("shout", "k1", "hi")
	fmt.Println(agents.StatusName(o.Status), string(o.Response))

	if _, err := node.Subscribe(ctx, &messages.Subscription{TenantId: "acme", Topic: "clicks", AgentType: actors.AgentCounter}); err != nil {
		fmt.Println(err)
		return
	}
	n, err := node.PublishAgent(ctx, &messages.TopicId{Type: "clicks", Source: "page-1"}, nil, acme)
	fmt.Println(n, err)
	fmt.Println(string(send(actors.AgentCounter, "page-1", "").Response))
	o = send("nobody", "k", "")
	fmt.Println(agents.StatusName(o.Status), agents.ReasonCode(o.Reason))
	// Output:
	// delivered HI from k1
	// 1 <nil>
	// {"count":2}
	// undeliverable no-live-owner
}

// Send several messages in one call: one outcome per envelope, in order; the messages to one
// agent are handled in their order in the batch.
func ExampleNode_SendAgentBatch() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dair-agents-batch-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(dir, "dair.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	node, err := actors.Start(ctx, actors.Config{Store: st, Roles: []string{actors.RoleRuntime}, AgentTypes: []string{actors.AgentCounter}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Stop(ctx)

	acme := &messages.ExecutionContextSnapshot{TenantId: "acme"}
	var envs []*messages.MessageEnvelope
	for _, key := range []string{"a", "b", "a", "a"} {
		envs = append(envs, &messages.MessageEnvelope{Recipient: &messages.AgentId{Type: actors.AgentCounter, Key: key},
			Snapshot: acme, ContentType: "application/json", Payload: []byte(`{}`)})
	}
	envs = append(envs, &messages.MessageEnvelope{Recipient: &messages.AgentId{Type: "nobody", Key: "k"}, Snapshot: acme})
	outs, err := node.SendAgentBatch(ctx, envs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, o := range outs {
		fmt.Println(envs[i].Recipient.Key, agents.StatusName(o.Status), string(o.Response)+agents.ReasonCode(o.Reason))
	}
	// Output:
	// a delivered {"count":1}
	// b delivered {"count":1}
	// a delivered {"count":2}
	// a delivered {"count":3}
	// k undeliverable no-live-owner
}
