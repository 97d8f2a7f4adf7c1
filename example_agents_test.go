package dair_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dairuntime/dair"
)

// Send to the built-in counter agent, subscribe it to a topic and publish; the same calls
// work unchanged on a node of a cluster.
func Example_agents() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dair-agents")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Println("remove dir:", err)
		}
	}()
	st, err := dair.OpenStore(ctx, "bolt://"+filepath.Join(dir, "dair.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println("close store:", err)
		}
	}()
	node, err := dair.Start(ctx, dair.Config{Store: st, AgentTypes: []string{dair.AgentCounter}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := node.Stop(ctx); err != nil {
			fmt.Println("stop node:", err)
		}
	}()

	acme := dair.Tenant("acme")
	id, err := dair.AgentRef("counter/page-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	o, err := node.SendAgent(ctx, id, []byte(`{}`), acme, time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dair.OutcomeName(o), string(o.Response))

	if _, err := node.Subscribe(ctx, &dair.Subscription{TenantId: "acme", TopicPrefix: "clicks.", AgentType: dair.AgentCounter}); err != nil {
		fmt.Println(err)
		return
	}
	topic, err := dair.Topic("clicks.home/page-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	n, err := node.PublishAgent(ctx, topic, []byte(`{}`), acme)
	fmt.Println("deliveries:", n, err)

	o, err = node.SendAgent(ctx, &dair.AgentID{Type: "nobody", Key: "k"}, nil, acme, time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dair.OutcomeName(o), dair.ReasonCode(o))
	// Output:
	// delivered {"count":1}
	// deliveries: 1 <nil>
	// undeliverable no-live-owner
}
