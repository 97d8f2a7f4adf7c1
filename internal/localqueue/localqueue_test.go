package localqueue_test

import (
	"fmt"
	"testing"

	"github.com/dairuntime/dair/internal/localqueue"
	"github.com/dairuntime/dair/messages"
)

func ids() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("lrun-%d", n) }
}

func req(run string, width int32) *messages.DispatchRequest {
	return &messages.DispatchRequest{SharedRunId: run, MaxParallelism: width}
}

func TestQueue_Offer(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(q *localqueue.Queue)
		reason string
	}{
		{"accepted", func(*localqueue.Queue) {}, ""},
		{"draining", func(q *localqueue.Queue) { q.Drain() }, localqueue.ReasonDraining},
		{"paused", func(q *localqueue.Queue) { q.Pause() }, localqueue.ReasonPaused},
		{"resumed", func(q *localqueue.Queue) { q.Drain(); q.Pause(); q.Resume() }, ""},
		{"full", func(q *localqueue.Queue) {
			next := ids()
			q.Offer(req("a", 0), next) // starts
			q.Start()
			q.Offer(req("b", 0), next) // waits: the only slot is taken
		}, localqueue.ReasonFull},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := localqueue.New(localqueue.Limits{Workers: 2, MaxConcurrent: 1, QueueCapacity: 1})
			tc.setup(q)
			lr, reason := q.Offer(req("r", 0), func() string { return "lrun-new" })
			if reason != tc.reason {
				t.Fatalf("reason = %q, want %q", reason, tc.reason)
			}
			if (lr != "") != (tc.reason == "") {
				t.Fatalf("local run id %q with reason %q", lr, reason)
			}
		})
	}
}

func TestQueue_Offer_repeatedDispatchKeepsItsRunID(t *testing.T) {
	q := localqueue.New(localqueue.Limits{Workers: 1, MaxConcurrent: 1, QueueCapacity: 1})
	next := ids()
	first, _ := q.Offer(req("r", 0), next)
	again, reason := q.Offer(req("r", 0), next)
	if again != first || reason != "" {
		t.Fatalf("repeated dispatch got %q (%q), want %q", again, reason, first)
	}
}

// TestQueue_Start_splitsWorkers: without a per-execution cap the workers are split among the
// run slots; a narrow pipeline gets no more workers than its widest level.
func TestQueue_Start_splitsWorkers(t *testing.T) {
	q := localqueue.New(localqueue.Limits{Workers: 8, MaxConcurrent: 2, QueueCapacity: 10})
	next := ids()
	q.Offer(req("wide", 0), next)
	q.Offer(req("narrow", 1), next)
	q.Offer(req("third", 0), next)
	started := q.Start()
	if len(started) != 2 || started[0].Workers != 4 || started[1].Workers != 1 {
		t.Fatalf("started %+v, want wide with 4 workers and narrow with 1", started)
	}
	d := &messages.CapacityDescriptor{}
	q.Fill(d)
	if d.AvailableRunSlots != 0 || d.QueuedRunCount != 1 || d.ActiveWorkerCount != 5 || d.CanAcceptRun {
		t.Fatalf("capacity after start: %+v", d)
	}
	if _, ok := q.Finish(started[0].LocalRunID); !ok {
		t.Fatal("finish of a running run refused")
	}
	if _, ok := q.Finish(started[0].LocalRunID); ok {
		t.Fatal("a run finished twice")
	}
	if next := q.Start(); len(next) != 1 || next[0].Req.SharedRunId != "third" {
		t.Fatalf("after a finish started %+v, want third", next)
	}
}

func TestQueue_pauseHoldsQueuedRuns(t *testing.T) {
	q := localqueue.New(localqueue.Limits{Workers: 2, MaxConcurrent: 2, QueueCapacity: 4})
	next := ids()
	lr, _ := q.Offer(req("r", 0), next)
	q.Pause()
	if got := q.Start(); len(got) != 0 {
		t.Fatalf("a paused queue started %d runs", len(got))
	}
	if shared, status, ok := q.Status(lr); !ok || shared != "r" || status != messages.RunQueued {
		t.Fatalf("status = %q %q %v", shared, status, ok)
	}
	if found, ok := q.Find("", "r"); !ok || found != lr {
		t.Fatalf("Find by shared run id = %q, %v", found, ok)
	}
	if r, ok := q.Unqueue(lr); !ok || r.Req.SharedRunId != "r" {
		t.Fatal("unqueue failed")
	}
	if _, ok := q.Find("", "r"); ok {
		t.Fatal("an unqueued run is still found")
	}
	if len(q.Holds()) != 0 {
		t.Fatalf("holds after unqueue: %v", q.Holds())
	}
}
