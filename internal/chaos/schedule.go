package chaos

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Schedule shaping. A schedule spreads its faults over the fault window after a warm-up, one
// per slot, each undone within the first 70% of its slot so the cluster has time to recover
// before the next one.
const (
	minWarmup  = 2 * time.Second
	maxWarmup  = 10 * time.Second
	minSlot    = 4 * time.Second
	targetSlot = 12 * time.Second
	holdStep   = 100 * time.Millisecond
)

// holdRange is the range each fault's hold is drawn from (then capped at half a slot): how
// long a killed node stays down, a paused node frozen, Redis down, a node partitioned.
var holdRange = map[Fault][2]time.Duration{
	FaultKill:         {1 * time.Second, 5 * time.Second},
	FaultPause:        {2 * time.Second, 8 * time.Second},
	FaultRedisRestart: {1 * time.Second, 5 * time.Second},
	FaultPartition:    {2 * time.Second, 8 * time.Second},
}

// Event.Node values that do not name a node.
const (
	// NoNode is the Node of a redis-restart event.
	NoNode = -1
	// Busiest targets the node holding the most placed runs when the fault hits (the first
	// node on a tie or when none holds any).
	Busiest = -2
)

// Event is one scheduled fault: at At after the start of the fault window, Fault hits node
// Node (0-based, or Busiest; NoNode for redis-restart) and is undone Hold later.
type Event struct {
	At    time.Duration
	Fault Fault
	Node  int
	Hold  time.Duration
}

// Target names what the event hits: a node id ("n2"), "busiest" or "redis".
func (e Event) Target() string {
	switch {
	case !e.Fault.OnNode():
		return "redis"
	case e.Node == Busiest:
		return "busiest"
	}
	return NodeName(e.Node)
}

// NodeName returns the id of node i (0-based) of the harness's cluster: "n<i+1>".
func NodeName(i int) string { return "n" + strconv.Itoa(i+1) }

// Schedule is a reproducible fault plan: the same seed, faults, node count and duration
// always give the same events.
type Schedule struct {
	Seed     int64
	Duration time.Duration
	Events   []Event
}

// NewSchedule plans faults over a window of duration d on a cluster of nodes nodes. Every
// kind of faults occurs at least once, in a seeded order, then the kinds repeat (one fault
// per ~12 s of window); holds and targets are seeded too: a node fault targets the busiest
// node half of the time, else a node drawn at random. Events never overlap: each is undone
// before the next starts. It is a pure function; it returns an error wrapping ErrBadConfig
// when d leaves less than 4 s per fault kind after the warm-up.
func NewSchedule(seed int64, faults []Fault, nodes int, d time.Duration) (Schedule, error) {
	s := Schedule{Seed: seed, Duration: d}
	if len(faults) == 0 {
		return s, nil
	}
	if nodes < 1 {
		return s, fmt.Errorf("%w: schedule needs at least one node", ErrBadConfig)
	}
	warmup := min(max(d/10, minWarmup), maxWarmup)
	window := d - warmup
	if window < time.Duration(len(faults))*minSlot {
		return s, fmt.Errorf("%w: duration %s is too short for %d fault kinds (need at least %s)",
			ErrBadConfig, d, len(faults), warmup+time.Duration(len(faults))*minSlot)
	}
	count := max(len(faults), int(window/targetSlot))
	slot := window / time.Duration(count)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	order := make([]Fault, 0, count+len(faults))
	for len(order) < count {
		perm := append([]Fault(nil), faults...)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		order = append(order, perm...)
	}
	for i, f := range order[:count] {
		e := Event{Fault: f, Node: NoNode}
		e.At = roundTo(warmup+time.Duration(i)*slot+randDuration(rng, 0, slot/5), holdStep)
		r := holdRange[f]
		e.Hold = roundTo(min(randDuration(rng, r[0], r[1]), slot/2), holdStep)
		if f.OnNode() {
			e.Node = Busiest
			if rng.IntN(2) == 1 {
				e.Node = rng.IntN(nodes)
			}
		}
		s.Events = append(s.Events, e)
	}
	return s, nil
}

// randDuration returns a duration in [lo, hi).
func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// roundTo rounds d down to a multiple of step (at least step).
func roundTo(d, step time.Duration) time.Duration { return max(d/step*step, step) }

// String renders the schedule, one event a line:
//
//	fault schedule (seed 1): 4 faults in 25s
//	  +2.9s   kill           n2     held 1.8s
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault schedule (seed %d): %d faults in %s\n", s.Seed, len(s.Events), s.Duration)
	for _, e := range s.Events {
		fmt.Fprintf(&b, "  %-8s %-14s %-8s held %s\n", "+"+e.At.String(), e.Fault, e.Target(), e.Hold)
	}
	return b.String()
}
