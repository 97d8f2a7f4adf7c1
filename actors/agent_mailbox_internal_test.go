package actors

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// heldDispatcher keeps the runs scheduled on it until the test runs them.
type heldDispatcher struct{ runs []func() }

func (d *heldDispatcher) Schedule(fn func()) { d.runs = append(d.runs, fn) }
func (d *heldDispatcher) Throughput() int    { return 2 }

// runAll runs the scheduled runs, and those they schedule, in order.
func (d *heldDispatcher) runAll() {
	for len(d.runs) > 0 {
		fn := d.runs[0]
		d.runs = d.runs[1:]
		fn()
	}
}

// recordingInvoker records what the mailbox hands it; a user message "panic" panics.
type recordingInvoker struct {
	got       []any
	escalated []any
}

func (r *recordingInvoker) InvokeSystemMessage(m any) { r.got = append(r.got, m) }
func (r *recordingInvoker) InvokeUserMessage(m any) {
	if m == "panic" {
		panic("boom")
	}
	r.got = append(r.got, m)
}
func (r *recordingInvoker) EscalateFailure(_ any, m any) { r.escalated = append(r.escalated, m) }

func newTestMailbox() (*agentMailbox, *heldDispatcher, *recordingInvoker) {
	_, mb := agentMailboxProps()
	d, inv := &heldDispatcher{}, &recordingInvoker{}
	mb.RegisterHandlers(inv, d)
	mb.Start()
	return mb, d, inv
}

var (
	sysStarted = &actor.Started{}
	sysStop    = &actor.Stop{}
)

func TestAgentMailbox(t *testing.T) {
	tests := []struct {
		name string
		run  func(mb *agentMailbox, d *heldDispatcher) (inline []bool)
		want []any
		// escalated are the messages a panic escalated.
		escalated []any
	}{
		{"system messages before user messages, user messages in order", func(mb *agentMailbox, d *heldDispatcher) []bool {
			mb.PostUserMessage("u1")
			mb.PostUserMessage("u2")
			mb.PostSystemMessage(sysStarted)
			mb.PostUserMessage("u3")
			if len(d.runs) != 1 {
				t.Errorf("%d runs scheduled, want 1", len(d.runs))
			}
			d.runAll()
			return nil
		}, []any{sysStarted, "u1", "u2", "u3"}, nil},
		{"a batch is posted message by message", func(mb *agentMailbox, d *heldDispatcher) []bool {
			mb.PostUserMessage(testBatch{"b1", "b2"})
			d.runAll()
			return nil
		}, []any{"b1", "b2"}, nil},
		{"suspended: user messages wait, system messages do not", func(mb *agentMailbox, d *heldDispatcher) []bool {
			mb.PostSystemMessage(&actor.SuspendMailbox{})
			mb.PostUserMessage("u1")
			d.runAll()
			mb.PostSystemMessage(sysStop)
			d.runAll()
			inline := mb.postInline("u2") // suspended: queued behind u1
			mb.PostSystemMessage(&actor.ResumeMailbox{})
			d.runAll()
			return []bool{inline}
		}, []any{sysStop, "u1", "u2"}, nil},
		{"an idle, empty mailbox runs the caller's message in place", func(mb *agentMailbox, d *heldDispatcher) []bool {
			inline := mb.postInline("u1")
			if len(d.runs) != 0 {
				t.Errorf("%d runs scheduled for an inline message", len(d.runs))
			}
			return []bool{inline}
		}, []any{"u1"}, []any(nil)},
		{"a queued message keeps its place before an inline one", func(mb *agentMailbox, d *heldDispatcher) []bool {
			mb.PostUserMessage("u1")
			inline := mb.postInline("u2")
			d.runAll()
			return []bool{inline}
		}, []any{"u1", "u2"}, nil},
		{"a run in progress takes the message", func(mb *agentMailbox, d *heldDispatcher) []bool {
			mb.running.Store(true) // a run on the dispatcher owns the mailbox
			inline := mb.postInline("u2")
			mb.process() // that run goes on and sees it
			return []bool{inline}
		}, []any{"u2"}, nil},
		{"a panic inline escalates and frees the mailbox", func(mb *agentMailbox, d *heldDispatcher) []bool {
			inline := []bool{mb.postInline("panic"), mb.postInline("u1")}
			return inline
		}, []any{"u1"}, []any{"panic"}},
		{"a panic in a run escalates; the rest waits for the next run", func(mb *agentMailbox, d *heldDispatcher) []bool {
			mb.PostUserMessage("u1")
			mb.PostUserMessage("panic")
			mb.PostUserMessage("u2")
			d.runAll()
			return nil
		}, []any{"u1", "u2"}, []any{"panic"}},
		{"throughput yields but goes on", func(mb *agentMailbox, d *heldDispatcher) []bool {
			for _, m := range []string{"u1", "u2", "u3", "u4", "u5"} {
				mb.PostUserMessage(m)
			}
			d.runAll()
			return nil
		}, []any{"u1", "u2", "u3", "u4", "u5"}, nil},
	}
	wantInline := map[string][]bool{
		"suspended: user messages wait, system messages do not":     {false},
		"an idle, empty mailbox runs the caller's message in place": {true},
		"a queued message keeps its place before an inline one":     {false},
		"a run in progress takes the message":                       {false},
		"a panic inline escalates and frees the mailbox":            {true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mb, d, inv := newTestMailbox()
			inline := tt.run(mb, d)
			if !slices.Equal(inv.got, tt.want) {
				t.Errorf("invoked %v, want %v", inv.got, tt.want)
			}
			if !slices.Equal(inv.escalated, tt.escalated) {
				t.Errorf("escalated %v, want %v", inv.escalated, tt.escalated)
			}
			if !slices.Equal(inline, wantInline[tt.name]) {
				t.Errorf("inline %v, want %v", inline, wantInline[tt.name])
			}
			if mb.running.Load() || mb.pending.Load() != 0 {
				t.Errorf("after the test: running %v, %d pending", mb.running.Load(), mb.pending.Load())
			}
		})
	}
}

// testBatch is an actor.MessageBatch.
type testBatch []any

func (b testBatch) GetMessages() []any { return b }

func TestAgentMailbox_longBacklogKeepsOrder(t *testing.T) {
	mb, d, inv := newTestMailbox()
	var want []any
	for i := range 5000 {
		mb.PostUserMessage(i)
		want = append(want, i)
		if i%700 == 0 {
			// take a few, as a run would, while more keep coming
			for range 300 {
				if m, _ := mb.pop(); m != nil {
					mb.pending.Add(-1)
					inv.got = append(inv.got, m)
				}
			}
		}
	}
	d.runAll() // the run scheduled by the first message takes the rest
	if len(inv.got) != len(want) {
		t.Fatalf("%d messages handled, want %d", len(inv.got), len(want))
	}
	for i := range want {
		if inv.got[i] != want[i] {
			t.Fatalf("message %d is %v, want %v", i, inv.got[i], want[i])
		}
	}
}
