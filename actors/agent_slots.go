package actors

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/agents"
)

// agentSlotShards is the number of shards of the active-agent registry.
const agentSlotShards = 32

// slotClosed marks an agentSlot that takes no more direct deliveries.
const slotClosed = 1 << 63

// agentSlots is the registry of this node's active agents that local callers deliver to
// directly, past the worker's mailbox: the worker adds an agent when it activates it and removes
// it when it passivates it; callers only read. It is goroutine-safe.
type agentSlots struct {
	seed   maphash.Seed
	shards [agentSlotShards]struct {
		mu sync.RWMutex // guards m
		m  map[agents.Key]*agentSlot
	}
}

// agentSlot is one active agent: its actor and the count of direct deliveries made to it. The
// worker closes the slot before it passivates the agent, so that the count it compares with
// what the agent handled is final; a caller that finds the slot closed goes through the worker.
type agentSlot struct {
	pid *actor.PID
	// mailbox is the agent's mailbox: a local caller posts to it directly (and handles its own
	// message inline when the agent is idle, see agentMailbox.postInline).
	mailbox *agentMailbox
	state   atomic.Uint64 // slotClosed | direct deliveries
}

func newAgentSlots() *agentSlots {
	s := &agentSlots{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[agents.Key]*agentSlot{}
	}
	return s
}

func (s *agentSlots) shard(k agents.Key) int {
	return int(maphash.Comparable(s.seed, k) % agentSlotShards)
}

// get returns the slot of k, or nil.
func (s *agentSlots) get(k agents.Key) *agentSlot {
	sh := &s.shards[s.shard(k)]
	sh.mu.RLock()
	slot := sh.m[k]
	sh.mu.RUnlock()
	return slot
}

// put registers the slot of k (worker only).
func (s *agentSlots) put(k agents.Key, slot *agentSlot) {
	sh := &s.shards[s.shard(k)]
	sh.mu.Lock()
	sh.m[k] = slot
	sh.mu.Unlock()
}

// remove forgets k (worker only).
func (s *agentSlots) remove(k agents.Key) {
	sh := &s.shards[s.shard(k)]
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}

// clear closes and forgets every slot (the worker restarts or stops; its agents stop).
func (s *agentSlots) clear() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, slot := range sh.m {
			slot.close()
			delete(sh.m, k)
		}
		sh.mu.Unlock()
	}
}

// acquire counts one direct delivery, unless the slot is closed (false).
func (a *agentSlot) acquire() bool { return a.acquireN(1) }

// acquireN counts n direct deliveries, unless the slot is closed (false).
func (a *agentSlot) acquireN(n uint64) bool {
	for {
		v := a.state.Load()
		if v&slotClosed != 0 {
			return false
		}
		if a.state.CompareAndSwap(v, v+n) {
			return true
		}
	}
}

// close stops direct deliveries and returns how many were made.
func (a *agentSlot) close() uint64 {
	return a.state.Or(slotClosed) &^ slotClosed
}

// reopen allows direct deliveries again (the agent stays active).
func (a *agentSlot) reopen() { a.state.And(^uint64(slotClosed)) }
