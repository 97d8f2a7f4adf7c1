package agents_test

import (
	"fmt"

	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/messages"
)

func ExampleTable_Route() {
	dir := agents.NewDirectory(agents.Config{}, agents.Member{ID: "self", NodeID: "n0"})
	dir.SetMembers([]agents.Member{
		{ID: "self", NodeID: "n0"},
		{ID: "w1", NodeID: "n1", Address: "10.0.0.1:8090", Types: []string{"counter"}},
	})
	r := dir.Table().Route("acme", &messages.AgentId{Type: "counter", Key: "k1"})
	fmt.Println(r.Worker.ID, r.Worker.Address)
	r = dir.Table().Route("acme", &messages.AgentId{Type: "echo", Key: "k1"})
	fmt.Println(agents.ReasonCode(r.Reason))
	// Output:
	// w1 10.0.0.1:8090
	// no-live-owner
}

func ExampleResolve() {
	dir := agents.NewDirectory(agents.Config{}, agents.Member{ID: "self", NodeID: "n0"})
	dir.SetMembers([]agents.Member{{ID: "self"}, {ID: "w1", Types: []string{"echo"}}})
	dir.Register(&messages.AgentWorkerRegistration{WorkerId: "self", Version: 1, Subscriptions: []*messages.Subscription{
		{Id: "s1", TenantId: "acme", TopicPrefix: "orders.", AgentType: "echo"},
	}})
	plan := agents.Resolve(dir.Index(), dir.Table(), "acme", &messages.TopicId{Type: "orders.eu", Source: "o-17"})
	fmt.Println(plan.Workers, plan.ByWorker["w1"][0].Key)
	// Output: [w1] o-17
}
