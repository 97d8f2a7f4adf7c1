package controlplane

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// Circuit breaker settings: after CircuitFailures consecutive retryable dispatch failures to an
// instance, this control plane sends it no work for CircuitOpenFor (then tries again).
const (
	CircuitFailures = 3
	CircuitOpenFor  = 10 * time.Second
)

// Circuits is a control plane's view of which instances failed to take work. It is a
// client-side breaker: each control plane keeps its own, as each one dispatches independently.
// The dispatcher records outcomes; the reconciler reports open circuits. It is goroutine-safe.
type Circuits struct {
	mu    sync.Mutex // guards fails, open
	fails map[string]int
	open  map[string]time.Time
}

// NewCircuits returns a breaker with every circuit closed.
func NewCircuits() *Circuits {
	return &Circuits{fails: map[string]int{}, open: map[string]time.Time{}}
}

// Record notes one dispatch outcome; a retryable failure counts toward opening the circuit. It
// reports whether this outcome opened it.
func (c *Circuits) Record(id string, res *messages.ProviderResult, now time.Time) (opened bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.GetOk() {
		delete(c.fails, id)
		delete(c.open, id)
		return false
	}
	if !res.GetRetryable() {
		return false
	}
	c.fails[id]++
	if c.fails[id] >= CircuitFailures {
		if _, already := c.open[id]; !already {
			opened = true
		}
		c.open[id] = now.Add(CircuitOpenFor)
	}
	return opened
}

// IsOpen reports whether the circuit of id is open at now. A circuit past its cool-down turns
// half-open: the next dispatch decides.
func (c *Circuits) IsOpen(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.open[id]
	if !ok {
		return false
	}
	if now.After(until) {
		delete(c.open, id)
		c.fails[id] = CircuitFailures - 1
		return false
	}
	return true
}

// Overlay returns insts with instances whose circuit is open marked unhealthy (copies; the
// input is not modified), so admission skips them and does not count them in their scope.
func (c *Circuits) Overlay(insts []*messages.CapacityDescriptor, now time.Time) []*messages.CapacityDescriptor {
	return markUnhealthy(insts, func(d *messages.CapacityDescriptor) bool { return c.IsOpen(CircuitKey(d), now) })
}

// CircuitKey is the circuit of d: its instance id as published by one registration (the
// member that published it and its endpoint). A replacement host that reuses a lost
// instance's id (a dedicated scope of one instance) registers under a new member and endpoint,
// so the failures of the dead incarnation do not keep it from work for CircuitOpenFor.
func CircuitKey(d *messages.CapacityDescriptor) string {
	key := d.GetRuntimeInstanceId()
	if n := d.GetNodeId(); n != "" {
		key += "@" + n
	}
	if e := d.GetEndpoint(); e != "" {
		key += " " + e
	}
	return key
}

// MemberOverlay returns insts with every instance published by an actor system that is not
// one of the live members (actor system ids) marked unhealthy (a copy; insts is not modified). Such a descriptor is the
// last word of a member the cluster lost, possibly re-published by it before it learned it was
// declared dead: it must neither receive runs nor count as the tenant's capacity.
func MemberOverlay(insts []*messages.CapacityDescriptor, members []string) []*messages.CapacityDescriptor {
	live := make(map[string]bool, len(members))
	for _, id := range members {
		live[id] = true
	}
	return markUnhealthy(insts, func(d *messages.CapacityDescriptor) bool { return d.NodeId != "" && !live[d.NodeId] })
}

// markUnhealthy returns insts with a copy of each descriptor that bad reports marked unhealthy
// and unable to accept runs; insts itself when bad reports none. insts is not modified.
func markUnhealthy(insts []*messages.CapacityDescriptor, bad func(*messages.CapacityDescriptor) bool) []*messages.CapacityDescriptor {
	var out []*messages.CapacityDescriptor
	for i, d := range insts {
		if !bad(d) {
			if out != nil {
				out = append(out, d)
			}
			continue
		}
		if out == nil {
			out = append(make([]*messages.CapacityDescriptor, 0, len(insts)), insts[:i]...)
		}
		cp := proto.Clone(d).(*messages.CapacityDescriptor)
		cp.Status, cp.CanAcceptRun = messages.InstanceUnhealthy, false
		out = append(out, cp)
	}
	if out == nil {
		return insts
	}
	return out
}
