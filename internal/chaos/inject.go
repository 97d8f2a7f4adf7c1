package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/localcluster"
)

// inject carries out the schedule from start, one event after another (an event whose undo
// overran the next one's time starts late), and returns what it did, in order.
func (h *harness) inject(ctx context.Context, start time.Time) []FaultRecord {
	var out []FaultRecord
	for _, e := range h.sched.Events {
		if !sleepUntil(ctx, start.Add(e.At)) {
			break
		}
		out = append(out, h.apply(ctx, start, e))
	}
	sleepUntil(ctx, start.Add(h.cfg.Duration))
	return out
}

// apply injects one fault, holds it, undoes it and reports it.
func (h *harness) apply(ctx context.Context, start time.Time, e Event) FaultRecord {
	h.refresh(ctx) // the placement of the runs right before the fault
	var node *localcluster.Node
	rec := FaultRecord{Event: e, Target: "redis"}
	if e.Fault.OnNode() {
		node = h.target(e.Node)
		rec.Target, rec.PID = node.ID(), node.PID()
	}
	if node != nil {
		rec.Affected = h.track.affected(node.ID())
	} else {
		rec.Affected = h.track.affected("")
	}
	rec.Onset = time.Now()
	if err := h.hit(ctx, e, node); err != nil {
		rec.Err = err.Error()
		h.out.printf("chaos: +%-5s %s %s FAILED: %v", since(start), e.Fault, rec.Target, err)
		return rec
	}
	rec.Injected = true
	h.out.printf("chaos: +%-5s %s %s (%d runs placed there), for %s", since(start), e.Fault, rec.Target, len(rec.Affected), e.Hold)
	if !sleepUntil(ctx, rec.Onset.Add(e.Hold)) {
		rec.Err = "interrupted before the undo" // Run's cleanup kills every process anyway
		return rec
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
	defer cancel()
	if err := h.undo(uctx, e, node); err != nil {
		rec.Err = fmt.Sprintf("undo: %v", err)
		h.out.printf("chaos: +%-5s undo %s %s FAILED: %v", since(start), e.Fault, rec.Target, err)
		return rec
	}
	rec.Restored = time.Now()
	h.out.printf("chaos: +%-5s %s %s undone (%s)", since(start), e.Fault, rec.Target, undoneHow(e.Fault))
	return rec
}

// target resolves an event's node: the busiest (most placed runs) for Busiest.
func (h *harness) target(i int) *localcluster.Node {
	if i != Busiest {
		return h.cluster.Node(i)
	}
	best, most := h.cluster.Node(0), -1
	for _, n := range h.cluster.Nodes() {
		if k := len(h.track.affected(n.ID())); k > most {
			best, most = n, k
		}
	}
	return best
}

// hit injects the fault of e.
func (h *harness) hit(ctx context.Context, e Event, n *localcluster.Node) error {
	switch e.Fault {
	case FaultKill:
		return n.Kill()
	case FaultPause:
		return n.Stop()
	case FaultPartition:
		return n.Partition(ctx)
	case FaultRedisRestart:
		if h.redis == nil {
			return errors.New("no private redis-server to kill")
		}
		return h.redis.Kill()
	}
	return fmt.Errorf("unknown %s", e.Fault)
}

// undo reverts the fault of e: restart, SIGCONT, heal, or restart Redis.
func (h *harness) undo(ctx context.Context, e Event, n *localcluster.Node) error {
	switch e.Fault {
	case FaultKill:
		return n.Restart(ctx)
	case FaultPause:
		return n.Cont()
	case FaultPartition:
		return n.Heal(ctx)
	case FaultRedisRestart:
		return h.redis.Restart(ctx)
	}
	return fmt.Errorf("unknown %s", e.Fault)
}

// revive brings a node back whatever happened to it: restarted if dead, resumed if stopped,
// healed if partitioned.
func (h *harness) revive(ctx context.Context, n *localcluster.Node) error {
	if !n.Running() {
		return n.Restart(ctx)
	}
	return errors.Join(n.Cont(), n.Heal(ctx))
}

func undoneHow(f Fault) string {
	switch f {
	case FaultKill:
		return "restarted and ready"
	case FaultPause:
		return "SIGCONT"
	case FaultPartition:
		return "healed"
	default:
		return "redis-server restarted on its AOF"
	}
}

func since(start time.Time) time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
