package cluster_test

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/cluster"
)

// Example starts a node, watches membership and shuts down. (Not run: it binds ports.)
func Example() {
	sys := actor.NewActorSystem()
	m, err := cluster.Start(context.Background(), sys, cluster.Config{
		NodeID:  "node-1",
		Join:    []string{"127.0.0.1:7946"},
		Profile: cluster.ProfileLocal,
		Roles:   []string{"runtime"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	events, cancel := m.Subscribe(16)
	go func() {
		for ev := range events {
			fmt.Println(ev.Kind, ev.Member.NodeID, ev.Member.Address)
		}
	}()
	fmt.Println(len(m.Members()))
	cancel()
	if err := m.Shutdown(true); err != nil {
		fmt.Println(err)
	}
	sys.Shutdown()
}
