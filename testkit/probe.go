package testkit

import (
	"fmt"
	"github.com/dairuntime/dair/testkit/leak"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

// probeBuffer is the capacity of a Probe's message channel.
const probeBuffer = 1024

// Envelope is one message received by a Probe, with the PID that sent it (nil when the sender
// was the root context without a sender).
type Envelope struct {
	Message any
	Sender  *actor.PID
}

// Probe is a test actor that forwards every non-lifecycle message it receives, together with its
// sender, into a buffered channel that the test reads with ExpectMsg, ExpectMsgType and
// ExpectNoMsg. A message answered with ctx.Respond arrives with a nil sender (protoactor's
// Respond does not set one); an actor that answers with ctx.Request is recorded as the sender.
// Lifecycle messages (*actor.Started, *actor.Stopping, *actor.Stopped,
// *actor.Restarting) are not forwarded; *actor.Terminated is, so a probe can Watch others.
//
// The Expect methods call t.Fatalf and must therefore be called from the test goroutine. PID,
// LastSender, Send and Reply are goroutine-safe. The probe's actor is stopped in t.Cleanup.
type Probe struct {
	t      testing.TB
	system *actor.ActorSystem
	pid    *actor.PID
	inbox  chan Envelope
	done   chan struct{}

	// mu guards lastSender.
	mu         sync.Mutex
	lastSender *actor.PID
}

// probeWatch asks the probe actor to watch a PID, so that its Terminated is forwarded.
type probeWatch struct{ pid *actor.PID }

// probeRequest asks the probe actor to send msg to pid with itself as sender.
type probeRequest struct {
	to  *actor.PID
	msg any
}

// NewProbe spawns a Probe in system. The probe is stopped when the test ends.
func NewProbe(t testing.TB, system *actor.ActorSystem) *Probe {
	t.Helper()
	p := &Probe{
		t:      t,
		system: system,
		inbox:  make(chan Envelope, probeBuffer),
		done:   make(chan struct{}),
	}
	p.pid = system.Root.Spawn(actor.PropsFromFunc(p.receive))
	t.Cleanup(p.stop)
	return p
}

func (p *Probe) receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	case probeRequest:
		ctx.Request(msg.to, msg.msg)
		return
	case probeWatch:
		ctx.Watch(msg.pid)
		return
	}
	env := Envelope{Message: ctx.Message(), Sender: ctx.Sender()}
	select {
	case p.inbox <- env:
	case <-p.done:
	}
}

func (p *Probe) stop() {
	close(p.done)
	if err := p.system.Root.StopFuture(p.pid).Wait(); err != nil {
		p.t.Logf("testkit: stop probe %s: %v", p.pid.Id, err)
	}
}

// PID returns the probe actor's PID. Send it to the actor under test as a reply target.
func (p *Probe) PID() *actor.PID { return p.pid }

// LastSender returns the sender of the last message taken by an Expect method, or nil.
func (p *Probe) LastSender() *actor.PID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSender
}

// Send sends msg to the actor at to with the probe as sender (the receiver sees the probe as
// ctx.Sender() and may ctx.Respond to it). It does not block.
func (p *Probe) Send(to *actor.PID, msg any) {
	p.system.Root.Send(p.pid, probeRequest{to: to, msg: msg})
}

// Reply sends msg to LastSender with the probe as sender. It fails the test if no message has
// been taken yet.
func (p *Probe) Reply(msg any) {
	p.t.Helper()
	to := p.LastSender()
	if to == nil {
		p.t.Fatalf("testkit: probe reply: no sender to reply to")
		return
	}
	p.Send(to, msg)
}

// Watch makes the probe watch pid; the probe then receives *actor.Terminated when pid stops.
func (p *Probe) Watch(pid *actor.PID) {
	p.system.Root.Send(p.pid, probeWatch{pid: pid})
}

// Receive blocks until the next message arrives or timeout passes, and reports whether one did.
// It does not fail the test.
func (p *Probe) Receive(timeout time.Duration) (Envelope, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case env := <-p.inbox:
		p.mu.Lock()
		p.lastSender = env.Sender
		p.mu.Unlock()
		return env, true
	case <-timer.C:
		return Envelope{}, false
	}
}

// ExpectMsg waits up to timeout for the next message and fails the test unless it equals want
// (proto.Equal for protobuf messages, reflect.DeepEqual otherwise). It returns the message.
func (p *Probe) ExpectMsg(want any, timeout time.Duration) any {
	p.t.Helper()
	env, ok := p.Receive(timeout)
	if !ok {
		p.t.Fatalf("testkit: probe %s: no message within %v, want %T %v", p.pid.Id, timeout, want, want)
		return nil
	}
	if !messagesEqual(want, env.Message) {
		p.t.Fatalf("testkit: probe %s: got %T %v, want %T %v", p.pid.Id, env.Message, env.Message, want, want)
	}
	return env.Message
}

// ExpectMsgType waits up to timeout for the next message and fails the test unless it has
// type T. It returns the message as a T.
func ExpectMsgType[T any](p *Probe, timeout time.Duration) T {
	p.t.Helper()
	var zero T
	env, ok := p.Receive(timeout)
	if !ok {
		p.t.Fatalf("testkit: probe %s: no message within %v, want type %T", p.pid.Id, timeout, zero)
		return zero
	}
	got, ok := env.Message.(T)
	if !ok {
		p.t.Fatalf("testkit: probe %s: got %T %v, want type %T", p.pid.Id, env.Message, env.Message, zero)
		return zero
	}
	return got
}

// ExpectNoMsg fails the test if a message arrives within d. It blocks for d.
func (p *Probe) ExpectNoMsg(d time.Duration) {
	p.t.Helper()
	if env, ok := p.Receive(d); ok {
		p.t.Fatalf("testkit: probe %s: unexpected message %T %v", p.pid.Id, env.Message, env.Message)
	}
}

func messagesEqual(want, got any) bool {
	wm, wok := want.(proto.Message)
	gm, gok := got.(proto.Message)
	if wok && gok {
		return proto.Equal(wm, gm)
	}
	return reflect.DeepEqual(want, got)
}

// EventTap collects *actor.SupervisorEvent and *actor.DeadLetterEvent values published on an
// actor system's EventStream. Its methods are goroutine-safe; the Expect methods call t.Fatalf
// and must be called from the test goroutine. The subscription ends in t.Cleanup.
type EventTap struct {
	t           testing.TB
	supervision chan *actor.SupervisorEvent
	deadLetters chan *actor.DeadLetterEvent

	// mu guards dropped.
	mu      sync.Mutex
	dropped int
}

// TapSupervisorEvents subscribes an EventTap to system's EventStream.
func TapSupervisorEvents(t testing.TB, system *actor.ActorSystem) *EventTap {
	t.Helper()
	tap := &EventTap{
		t:           t,
		supervision: make(chan *actor.SupervisorEvent, probeBuffer),
		deadLetters: make(chan *actor.DeadLetterEvent, probeBuffer),
	}
	sub := system.EventStream.Subscribe(tap.handle)
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	return tap
}

// handle runs on the publisher's goroutine and must not block.
func (e *EventTap) handle(evt any) {
	switch ev := evt.(type) {
	case *actor.SupervisorEvent:
		select {
		case e.supervision <- ev:
		default:
			e.drop()
		}
	case *actor.DeadLetterEvent:
		select {
		case e.deadLetters <- ev:
		default:
			e.drop()
		}
	}
}

func (e *EventTap) drop() {
	e.mu.Lock()
	e.dropped++
	e.mu.Unlock()
}

// Dropped returns how many events were discarded because the tap's buffer was full.
func (e *EventTap) Dropped() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}

// ExpectSupervisorEvent waits up to timeout for the next supervisor event (a restart, stop,
// resume or escalation decided by a supervisor) and fails the test if none arrives.
func (e *EventTap) ExpectSupervisorEvent(timeout time.Duration) *actor.SupervisorEvent {
	e.t.Helper()
	ev, err := next(e.supervision, timeout)
	if err != nil {
		e.t.Fatalf("testkit: supervisor event: %v", err)
	}
	return ev
}

// ExpectDeadLetter waits up to timeout for the next dead letter and fails the test if none
// arrives.
func (e *EventTap) ExpectDeadLetter(timeout time.Duration) *actor.DeadLetterEvent {
	e.t.Helper()
	ev, err := next(e.deadLetters, timeout)
	if err != nil {
		e.t.Fatalf("testkit: dead letter: %v", err)
	}
	return ev
}

// ExpectNoSupervisorEvent fails the test if a supervisor event arrives within d.
func (e *EventTap) ExpectNoSupervisorEvent(d time.Duration) {
	e.t.Helper()
	if ev, err := next(e.supervision, d); err == nil {
		e.t.Fatalf("testkit: unexpected supervisor event: child %v directive %v reason %v", ev.Child, ev.Directive, ev.Reason)
	}
}

func next[T any](ch <-chan T, timeout time.Duration) (T, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v, nil
	case <-timer.C:
		var zero T
		return zero, fmt.Errorf("none within %v", timeout)
	}
}

// ProtoactorLeakOptions returns goleak options that ignore protoactor-go's known background
// goroutines: the dead-letter log throttle's timer, which outlives the dead letter that started
// it by up to DeadLetterThrottleInterval (one second by default). Use them with
// goleak.VerifyNone or goleak.VerifyTestMain in actor packages.
func ProtoactorLeakOptions() []goleak.Option { return leak.Protoactor() }
