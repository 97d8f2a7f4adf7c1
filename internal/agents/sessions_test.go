package agents

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// sessionStep is one operation of a session-table scenario. Times are offsets from t0.
type sessionStep struct {
	do       string // open | reply | expire | evict | stop
	name     string // open, reply: the session's name
	worker   string // open, evict: the worker
	at       time.Duration
	deadline time.Duration // open: the caller's deadline (0: none, the RPC timeout applies)
	// want lists the resolutions as "name=status" (sorted), and for expire the workers to mark
	// unhealthy as "unhealthy=worker".
	want    []string
	pending int
}

func TestSessions_seedRules(t *testing.T) {
	const rpc = 30 * time.Second
	tests := []struct {
		name  string
		steps []sessionStep
	}{
		{"a reply resolves a pending session as the worker's outcome", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: 5 * time.Second, pending: 1},
			{do: "reply", name: "s1", want: []string{"s1=delivered"}, pending: 0},
		}},
		{"the deadline passing resolves it as timeout", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: 5 * time.Second, pending: 1},
			{do: "expire", at: 4 * time.Second, pending: 1},
			{do: "expire", at: 5 * time.Second, want: []string{"s1=timeout"}, pending: 0},
		}},
		{"a reply after the timeout is dropped", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: time.Second, pending: 1},
			{do: "expire", at: time.Second, want: []string{"s1=timeout"}, pending: 0},
			{do: "reply", name: "s1", pending: 0},
		}},
		{"eviction resolves the worker's pending sessions as undeliverable", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: 5 * time.Second, pending: 1},
			{do: "open", name: "s2", worker: "w1", deadline: 5 * time.Second, pending: 2},
			{do: "open", name: "s3", worker: "w2", deadline: 5 * time.Second, pending: 3},
			{do: "evict", worker: "w1", want: []string{"s1=undeliverable", "s2=undeliverable"}, pending: 1},
			{do: "reply", name: "s3", want: []string{"s3=delivered"}, pending: 0},
		}},
		{"a session that timed out before the eviction stays timeout", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: time.Second, pending: 1},
			{do: "open", name: "s2", worker: "w1", at: time.Second, deadline: 5 * time.Second, pending: 2},
			{do: "expire", at: 2 * time.Second, want: []string{"s1=timeout"}, pending: 1},
			{do: "evict", worker: "w1", want: []string{"s2=undeliverable"}, pending: 0},
		}},
		{"an RPC that exceeds the RPC timeout marks its worker unhealthy", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: time.Second, pending: 1},
			{do: "expire", at: time.Second, want: []string{"s1=timeout"}, pending: 0},
			{do: "expire", at: rpc - time.Millisecond, pending: 0},
			{do: "expire", at: rpc, want: []string{"unhealthy=w1"}, pending: 0},
		}},
		{"a late reply before the RPC deadline keeps the worker healthy", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: time.Second, pending: 1},
			{do: "expire", at: time.Second, want: []string{"s1=timeout"}, pending: 0},
			{do: "reply", name: "s1", pending: 0},
			{do: "expire", at: rpc, pending: 0},
		}},
		{"a deadline beyond the RPC timeout times out at the RPC deadline", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: 2 * rpc, pending: 1},
			{do: "expire", at: rpc, want: []string{"s1=timeout", "unhealthy=w1"}, pending: 0},
		}},
		{"no deadline means the RPC timeout", []sessionStep{
			{do: "open", name: "s1", worker: "w1", pending: 1},
			{do: "expire", at: rpc - time.Second, pending: 1},
			{do: "expire", at: rpc, want: []string{"s1=timeout", "unhealthy=w1"}, pending: 0},
		}},
		{"stopping fails every pending session and keeps timeouts", []sessionStep{
			{do: "open", name: "s1", worker: "w1", deadline: time.Second, pending: 1},
			{do: "open", name: "s2", worker: "w2", deadline: 5 * time.Second, pending: 2},
			{do: "expire", at: time.Second, want: []string{"s1=timeout"}, pending: 1},
			{do: "stop", want: []string{"s2=undeliverable"}, pending: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSessionSteps(t, rpc, tt.steps) })
	}
}

func runSessionSteps(t *testing.T, rpc time.Duration, steps []sessionStep) {
	t.Helper()
	t0 := time.Unix(1000, 0)
	s := NewSessions[string]()
	ids := map[string]uint64{}
	for i, st := range steps {
		var got []string
		record := func(rs []Resolution[string]) {
			for _, r := range rs {
				got = append(got, r.Value+"="+StatusName(r.Outcome.Status))
			}
		}
		switch st.do {
		case "open":
			var dl time.Time
			if st.deadline > 0 {
				dl = t0.Add(st.at + st.deadline)
			}
			ids[st.name] = s.Open(st.worker, st.name, t0.Add(st.at), dl, rpc)
		case "reply":
			if r, ok := s.Resolve(ids[st.name], Delivered([]byte("ok"), "", "w")); ok {
				record([]Resolution[string]{r})
			}
		case "expire":
			rs, sick := s.Expire(t0.Add(st.at))
			record(rs)
			for _, w := range sick {
				got = append(got, "unhealthy="+w)
			}
		case "evict":
			record(s.EvictWorker(st.worker, "failed its health probes"))
		case "stop":
			record(s.FailAll("the node is stopping"))
		default:
			t.Fatalf("step %d: unknown op %q", i, st.do)
		}
		slices.Sort(got)
		if !slices.Equal(got, st.want) {
			t.Fatalf("step %d (%s %s): resolutions %v, want %v", i, st.do, st.name, got, st.want)
		}
		if st.pending != s.Pending() {
			t.Fatalf("step %d (%s %s): pending %d, want %d", i, st.do, st.name, s.Pending(), st.pending)
		}
	}
}

func TestSessions_reasons(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := NewSessions[int]()
	s.Open("w1", 1, t0, t0.Add(time.Second), time.Minute)
	s.Open("w2", 2, t0, t0.Add(time.Hour), time.Minute)
	rs, _ := s.Expire(t0.Add(time.Second))
	if len(rs) != 1 || ReasonCode(rs[0].Outcome.Reason) != ReasonDeadlineExceeded || rs[0].Outcome.WorkerId != "w1" {
		t.Fatalf("expire = %+v", rs)
	}
	ev := s.EvictWorker("w2", "left the cluster")
	if len(ev) != 1 || ReasonCode(ev[0].Outcome.Reason) != ReasonWorkerEvicted {
		t.Fatalf("evict = %+v", ev)
	}
	if s.Len() != 1 { // w1's timed-out session awaits its RPC deadline
		t.Fatalf("Len = %d, want 1", s.Len())
	}
}

func TestSessions_Expire_scansOnlyWhenDue(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := NewSessions[int]()
	for i := range 100 {
		s.Open("w", i, t0, t0.Add(time.Duration(i+1)*time.Second), time.Hour)
	}
	for i := range 100 {
		rs, _ := s.Expire(t0.Add(time.Duration(i+1) * time.Second))
		if len(rs) != 1 || rs[0].Value != i {
			t.Fatalf("at %ds: %v", i+1, rs)
		}
	}
	if s.Pending() != 0 {
		t.Fatalf("pending %d", s.Pending())
	}
}

func TestSessions_OpenID_callerChosenIDs(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := NewSessions[string]()
	own := s.Open("w", "router's", t0, t0.Add(time.Second), time.Minute)
	tests := []struct {
		name string
		id   uint64
		ok   bool
	}{
		{"an id with the caller bit", CallerSessions | own, true},
		{"the same id again", CallerSessions | own, false},
		{"an id without the caller bit", own + 1, false},
		{"another caller id", CallerSessions | 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.OpenID(tt.id, "w", tt.name, t0, t0.Add(time.Second), time.Minute)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrSessionID) {
				t.Fatalf("OpenID(%#x) = %v, want ok=%v", tt.id, err, tt.ok)
			}
		})
	}
	if s.Pending() != 3 {
		t.Fatalf("pending %d, want 3", s.Pending())
	}
	if r, ok := s.Resolve(CallerSessions|own, Delivered(nil, "", "w")); !ok || r.Value != "an id with the caller bit" {
		t.Fatalf("resolve the caller's session: %v %v", r, ok)
	}
	if r, ok := s.Resolve(own, Delivered(nil, "", "w")); !ok || r.Value != "router's" {
		t.Fatalf("resolve the router's own session: %v %v", r, ok)
	}
	if rs, _ := s.Expire(t0.Add(time.Second)); len(rs) != 1 || rs[0].ID != CallerSessions|7 {
		t.Fatalf("expire: %v", rs)
	}
}

func ExampleSessions() {
	t0 := time.Unix(0, 0)
	s := NewSessions[string]()
	id := s.Open("worker-1", "caller-a", t0, t0.Add(5*time.Second), 30*time.Second)
	s.Open("worker-1", "caller-b", t0, t0.Add(time.Second), 30*time.Second)
	timeouts, _ := s.Expire(t0.Add(time.Second))
	fmt.Println(timeouts[0].Value, StatusName(timeouts[0].Outcome.Status))
	for _, r := range s.EvictWorker("worker-1", "failed 2 health probes") {
		fmt.Println(r.ID == id, r.Value, StatusName(r.Outcome.Status))
	}
	// Output:
	// caller-b timeout
	// true caller-a undeliverable
}
