package chaos

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNewSchedule_sameSeedSameEvents(t *testing.T) {
	a, err := NewSchedule(42, AllFaults, 3, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSchedule(42, AllFaults, 3, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different schedules:\n%s\n%s", a, b)
	}
	c, err := NewSchedule(43, AllFaults, 3, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Events, c.Events) {
		t.Fatalf("seeds 42 and 43 gave the same events:\n%s", a)
	}
}

func TestNewSchedule_shapes(t *testing.T) {
	tests := []struct {
		name      string
		faults    []Fault
		nodes     int
		d         time.Duration
		wantCount int
	}{
		{"short profile: one of each kind", AllFaults, 3, 25 * time.Second, 4},
		{"two minutes: one per 12s of window", AllFaults, 3, 2 * time.Minute, 9},
		{"one kind repeats", []Fault{FaultKill}, 3, time.Minute, 4},
		{"one node", []Fault{FaultPause, FaultRedisRestart}, 1, 30 * time.Second, 2},
		{"ten minutes", []Fault{FaultKill, FaultPartition}, 5, 10 * time.Minute, 49},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := int64(1); seed <= 50; seed++ {
				s, err := NewSchedule(seed, tt.faults, tt.nodes, tt.d)
				if err != nil {
					t.Fatal(err)
				}
				if len(s.Events) != tt.wantCount {
					t.Fatalf("seed %d: %d events, want %d\n%s", seed, len(s.Events), tt.wantCount, s)
				}
				checkSchedule(t, s, tt.faults, tt.nodes)
			}
		})
	}
}

// checkSchedule asserts a schedule's invariants: every kind present, events in order inside
// the window, each undone before the next, holds within their range, valid targets.
func checkSchedule(t *testing.T, s Schedule, faults []Fault, nodes int) {
	t.Helper()
	seen := map[Fault]bool{}
	var prevEnd time.Duration
	for i, e := range s.Events {
		seen[e.Fault] = true
		if e.At < minWarmup || e.At+e.Hold > s.Duration {
			t.Fatalf("event %d (%+v) outside the window after the warm-up\n%s", i, e, s)
		}
		if e.At <= prevEnd {
			t.Fatalf("event %d starts at %s before the previous one is undone (%s)\n%s", i, e.At, prevEnd, s)
		}
		prevEnd = e.At + e.Hold
		if r := holdRange[e.Fault]; e.Hold <= 0 || e.Hold > r[1] {
			t.Fatalf("event %d hold %s outside (0, %s]", i, e.Hold, r[1])
		}
		switch {
		case !e.Fault.OnNode() && e.Node != NoNode:
			t.Fatalf("event %d: redis-restart targets node %d", i, e.Node)
		case e.Fault.OnNode() && e.Node != Busiest && (e.Node < 0 || e.Node >= nodes):
			t.Fatalf("event %d: node %d of %d", i, e.Node, nodes)
		}
	}
	for _, f := range faults {
		if !seen[f] {
			t.Fatalf("no %s in\n%s", f, s)
		}
	}
}

func TestNewSchedule_errors(t *testing.T) {
	tests := []struct {
		name   string
		faults []Fault
		nodes  int
		d      time.Duration
	}{
		{"too short for four kinds", AllFaults, 3, 15 * time.Second},
		{"zero duration", []Fault{FaultKill}, 3, 0},
		{"no node", []Fault{FaultKill}, 0, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSchedule(1, tt.faults, tt.nodes, tt.d); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("err = %v, want ErrBadConfig", err)
			}
		})
	}
}

func TestNewSchedule_noFaults(t *testing.T) {
	s, err := NewSchedule(1, nil, 3, 10*time.Second)
	if err != nil || len(s.Events) != 0 {
		t.Fatalf("schedule %v, err %v; want no events", s, err)
	}
}

func TestSchedule_String(t *testing.T) {
	s := Schedule{Seed: 7, Duration: 25 * time.Second, Events: []Event{
		{At: 2900 * time.Millisecond, Fault: FaultKill, Node: 1, Hold: 1800 * time.Millisecond},
		{At: 9 * time.Second, Fault: FaultRedisRestart, Node: NoNode, Hold: 2 * time.Second},
		{At: 15 * time.Second, Fault: FaultPause, Node: Busiest, Hold: 3 * time.Second},
	}}
	want := "fault schedule (seed 7): 3 faults in 25s\n" +
		"  +2.9s    kill           n2       held 1.8s\n" +
		"  +9s      redis-restart  redis    held 2s\n" +
		"  +15s     pause          busiest  held 3s\n"
	if got := s.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(s.String(), "seed 7") {
		t.Fatal("the seed is not printed")
	}
}
