package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestMembership_SetAgentTypes_spreadsToPeers(t *testing.T) {
	a := startNode(t, "agent-a", false)
	b := startNode(t, "agent-b", false, a.addr())
	eventually(t, 10*time.Second, func() bool { return len(a.m.Members()) == 2 && len(b.m.Members()) == 2 }, "a and b see each other")
	events, cancel := a.m.Subscribe(16)
	defer cancel()

	if err := b.m.SetAgentTypes([]string{"echo", "counter"}); err != nil {
		t.Fatalf("SetAgentTypes() = %v", err)
	}
	ev := waitEvent(t, events, 10*time.Second, MemberUpdated, b.sys.ID)
	if !slices.Equal(ev.Member.AgentTypes, []string{"echo", "counter"}) {
		t.Errorf("updated member's AgentTypes = %v", ev.Member.AgentTypes)
	}
	eventually(t, 10*time.Second, func() bool {
		return slices.Equal(selfIn(b).AgentTypes, []string{"echo", "counter"})
	}, "b's own view lists its types")

	if err := b.m.SetAgentTypes(nil); err != nil {
		t.Fatalf("SetAgentTypes(nil) = %v", err)
	}
	ev = waitEvent(t, events, 10*time.Second, MemberUpdated, b.sys.ID)
	if len(ev.Member.AgentTypes) != 0 {
		t.Errorf("cleared AgentTypes = %v", ev.Member.AgentTypes)
	}
}

func TestMembership_SetAgentTypes_metaLimit(t *testing.T) {
	n := startNode(t, "agent-limit", false)
	err := n.m.SetAgentTypes([]string{strings.Repeat("t", memberlist.MetaMaxSize)})
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("SetAgentTypes(too large) = %v, want ErrMetaTooLarge", err)
	}
	if got := selfIn(n).AgentTypes; len(got) != 0 {
		t.Errorf("advertised types after a refused change = %v", got)
	}
	n.stop(t, false)
	if err := n.m.SetAgentTypes([]string{"echo"}); !errors.Is(err, ErrShutdown) {
		t.Errorf("SetAgentTypes after Shutdown = %v, want ErrShutdown", err)
	}
}

// selfIn returns the node's own entry from its member view (which follows memberlist's
// updates, unlike Self, fixed at start).
func selfIn(n *testNode) Member {
	for _, m := range n.m.Members() {
		if m.ID == n.sys.ID {
			return m
		}
	}
	return Member{}
}
