package testkit

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/dairuntime/dair/messages"
)

const waitShort = 2 * time.Second

// fakeTB records Fatalf calls instead of ending the test, so failure paths can be asserted.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

func (f *fakeTB) result() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed, f.msg
}

func leakOptions() []goleak.Option { return ProtoactorLeakOptions() }

// newSystem returns a quiet actor system shut down at the end of the test.
func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	return system
}

type plain struct {
	N int
	S string
}

func TestProbe_ExpectMsg_cases(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	tests := []struct {
		name     string
		send     any
		want     any
		wantFail string
	}{
		{name: "proto equal", send: &messages.Ping{Seq: 7}, want: &messages.Ping{Seq: 7}},
		{name: "struct equal", send: plain{N: 1, S: "a"}, want: plain{N: 1, S: "a"}},
		{name: "string", send: "hello", want: "hello"},
		{name: "proto mismatch", send: &messages.Ping{Seq: 1}, want: &messages.Ping{Seq: 2}, wantFail: "want"},
		{name: "type mismatch", send: &messages.Pong{Seq: 1}, want: &messages.Ping{Seq: 1}, wantFail: "want"},
		{name: "timeout", want: "never", wantFail: "no message within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system := newSystem(t)
			ftb := &fakeTB{TB: t}
			p := NewProbe(ftb, system)
			timeout := waitShort
			if tt.send != nil {
				system.Root.Send(p.PID(), tt.send)
			} else {
				timeout = 20 * time.Millisecond
			}
			p.ExpectMsg(tt.want, timeout)
			failed, msg := ftb.result()
			if tt.wantFail == "" && failed {
				t.Fatalf("unexpected failure: %s", msg)
			}
			if tt.wantFail != "" && (!failed || !strings.Contains(msg, tt.wantFail)) {
				t.Fatalf("failed=%v msg=%q, want failure containing %q", failed, msg, tt.wantFail)
			}
		})
	}
}

func TestProbe_Send_respond(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	system := newSystem(t)
	echo := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		// ctx.Respond carries no sender; Request does, so the probe can Reply.
		if ping, ok := ctx.Message().(*messages.Ping); ok {
			ctx.Request(ctx.Sender(), &messages.Pong{Seq: ping.Seq})
		}
	}))
	t.Cleanup(func() {
		if err := system.Root.StopFuture(echo).Wait(); err != nil {
			t.Errorf("stop echo: %v", err)
		}
	})
	p := NewProbe(t, system)
	p.Send(echo, &messages.Ping{Seq: 3})
	pong := ExpectMsgType[*messages.Pong](p, waitShort)
	if pong.Seq != 3 {
		t.Fatalf("pong seq = %d, want 3", pong.Seq)
	}
	if !p.LastSender().Equal(echo) {
		t.Fatalf("last sender = %v, want %v", p.LastSender(), echo)
	}
	p.Reply(&messages.Ping{Seq: 4})
	p.ExpectMsg(&messages.Pong{Seq: 4}, waitShort)
}

func TestProbe_ExpectMsgType_cases(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	tests := []struct {
		name     string
		send     any
		wantFail bool
	}{
		{name: "match", send: &messages.Ping{Seq: 1}},
		{name: "mismatch", send: &messages.Pong{Seq: 1}, wantFail: true},
		{name: "timeout", wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system := newSystem(t)
			ftb := &fakeTB{TB: t}
			p := NewProbe(ftb, system)
			timeout := waitShort
			if tt.send != nil {
				system.Root.Send(p.PID(), tt.send)
			} else {
				timeout = 20 * time.Millisecond
			}
			got := ExpectMsgType[*messages.Ping](p, timeout)
			failed, msg := ftb.result()
			if failed != tt.wantFail {
				t.Fatalf("failed = %v (%s), want %v", failed, msg, tt.wantFail)
			}
			if !tt.wantFail && got.GetSeq() != 1 {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestProbe_ExpectNoMsg_cases(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	tests := []struct {
		name     string
		send     bool
		wantFail bool
	}{
		{name: "quiet"},
		{name: "message arrives", send: true, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system := newSystem(t)
			ftb := &fakeTB{TB: t}
			p := NewProbe(ftb, system)
			if tt.send {
				system.Root.Send(p.PID(), "noise")
			}
			p.ExpectNoMsg(50 * time.Millisecond)
			if failed, msg := ftb.result(); failed != tt.wantFail {
				t.Fatalf("failed = %v (%s), want %v", failed, msg, tt.wantFail)
			}
		})
	}
}

func TestProbe_Watch_terminated(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	system := newSystem(t)
	target := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	p := NewProbe(t, system)
	p.Watch(target)
	p.Send(target, "hello") // serialized after Watch in the probe's mailbox
	if err := system.Root.StopFuture(target).Wait(); err != nil {
		t.Fatalf("stop target: %v", err)
	}
	term := ExpectMsgType[*actor.Terminated](p, waitShort)
	if !term.Who.Equal(target) {
		t.Fatalf("terminated %v, want %v", term.Who, target)
	}
}

func TestEventTap_ExpectSupervisorEvent_restart(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	system := newSystem(t)
	tap := TapSupervisorEvents(t, system)
	crasher := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			panic("boom")
		}
	}))
	t.Cleanup(func() {
		if err := system.Root.StopFuture(crasher).Wait(); err != nil {
			t.Errorf("stop crasher: %v", err)
		}
	})
	tap.ExpectNoSupervisorEvent(20 * time.Millisecond)
	system.Root.Send(crasher, "crash")
	ev := tap.ExpectSupervisorEvent(waitShort)
	if !ev.Child.Equal(crasher) || ev.Directive != actor.RestartDirective {
		t.Fatalf("event = child %v directive %v, want restart of %v", ev.Child, ev.Directive, crasher)
	}
	if tap.Dropped() != 0 {
		t.Fatalf("dropped = %d", tap.Dropped())
	}
}

func TestEventTap_ExpectDeadLetter_stoppedActor(t *testing.T) {
	defer goleak.VerifyNone(t, leakOptions()...)
	system := newSystem(t)
	tap := TapSupervisorEvents(t, system)
	gone := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := system.Root.StopFuture(gone).Wait(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	p := NewProbe(t, system)
	p.Send(gone, &messages.Ping{Seq: 9})
	dl := tap.ExpectDeadLetter(waitShort)
	if !dl.PID.Equal(gone) || !dl.Sender.Equal(p.PID()) {
		t.Fatalf("dead letter = %+v", dl)
	}
	ExpectMsgType[*actor.DeadLetterResponse](p, waitShort)
}
