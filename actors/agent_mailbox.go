package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// agentMailbox is an agent actor's mailbox: protoactor's Mailbox contract (system messages
// before user messages, suspension after a failure until the supervisor resumes it, at most one
// run at a time, on the dispatcher) plus postInline, which lets a caller that waits for the
// answer anyway handle its own message on its goroutine when the agent is idle, instead of
// waking a mailbox goroutine and then being woken by it. It is goroutine-safe.
type agentMailbox struct {
	mu       sync.Mutex // guards user, userHead, sys
	user     []any
	userHead int // user[userHead:] are queued
	sys      []any

	pending   atomic.Int32 // messages queued (user and system)
	running   atomic.Bool  // a run (on the dispatcher or inline) owns the invoker
	suspended atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	// run is process as a func value, made once: a method value handed to Schedule would be
	// allocated at every schedule.
	run func()
}

var _ actor.Mailbox = (*agentMailbox)(nil)

// agentMailboxProps returns the props option of an agent actor with a new agentMailbox, and the
// mailbox (it is produced once per actor: a restart keeps it).
func agentMailboxProps() (actor.PropsOption, *agentMailbox) {
	mb := &agentMailbox{}
	mb.run = mb.process
	return actor.WithMailbox(func() actor.Mailbox { return mb }), mb
}

// PostUserMessage queues msg (each message of an actor.MessageBatch) and schedules a run.
func (m *agentMailbox) PostUserMessage(msg any) {
	if b, ok := msg.(actor.MessageBatch); ok {
		for _, each := range b.GetMessages() {
			m.PostUserMessage(each)
		}
		return
	}
	m.mu.Lock()
	m.user = append(m.user, msg)
	m.mu.Unlock()
	m.pending.Add(1)
	m.schedule()
}

// PostSystemMessage queues msg ahead of every user message and schedules a run.
func (m *agentMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.sys = append(m.sys, msg)
	m.mu.Unlock()
	m.pending.Add(1)
	m.schedule()
}

// RegisterHandlers sets the actor's invoker and its dispatcher (at spawn, before Start).
func (m *agentMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start is called once the actor is spawned; there is nothing to start.
func (m *agentMailbox) Start() {}

// UserMessageCount returns the number of user messages queued.
func (m *agentMailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.user) - m.userHead
}

// postInline handles msg on the caller's goroutine when the mailbox is idle, empty and not
// suspended (so msg is next in order anyway), and queues it as PostUserMessage does otherwise.
// It reports whether msg was handled inline. Messages that arrive meanwhile are queued and run
// on the dispatcher afterwards: the caller handles its own message only.
func (m *agentMailbox) postInline(msg any) bool {
	if m.pending.Load() != 0 || m.suspended.Load() || !m.running.CompareAndSwap(false, true) {
		m.PostUserMessage(msg)
		return false
	}
	if m.pending.Load() != 0 || m.suspended.Load() { // something was queued before the claim
		m.running.Store(false)
		m.PostUserMessage(msg)
		return false
	}
	m.invoke(msg)
	m.release()
	return true
}

// invoke hands msg to the actor, turning a panic into a failure of the actor (the supervisor
// decides; the mailbox is suspended meanwhile).
func (m *agentMailbox) invoke(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}

// schedule starts a run on the dispatcher unless one owns the mailbox.
func (m *agentMailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.run)
	}
}

// release gives up the mailbox after a run and starts another one when messages arrived in
// the meantime that the run did not see.
func (m *agentMailbox) release() {
	m.running.Store(false)
	if m.pending.Load() > 0 && (!m.suspended.Load() || m.sysQueued()) {
		m.schedule()
	}
}

// process is a run on the dispatcher: system messages first, then user messages unless
// suspended, yielding the processor every throughput messages, until the queues are empty.
func (m *agentMailbox) process() {
	m.drain()
	m.release()
}

func (m *agentMailbox) drain() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for i, t := 0, m.dispatcher.Throughput(); ; i++ {
		if i >= t {
			i = 0
			runtime.Gosched()
		}
		var sys bool
		if msg, sys = m.pop(); msg == nil {
			return
		}
		m.pending.Add(-1)
		if !sys {
			m.invoker.InvokeUserMessage(msg)
			continue
		}
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.suspended.Store(true)
		case *actor.ResumeMailbox:
			m.suspended.Store(false)
		default:
			m.invoker.InvokeSystemMessage(msg)
		}
	}
}

// pop takes the next system message, else (unless suspended) the next user message; nil when
// there is none to take.
func (m *agentMailbox) pop() (msg any, sys bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sys) > 0 {
		msg = m.sys[0]
		m.sys[0] = nil
		m.sys = m.sys[1:]
		if len(m.sys) == 0 {
			m.sys = nil
		}
		return msg, true
	}
	if m.suspended.Load() || m.userHead == len(m.user) {
		return nil, false
	}
	msg = m.user[m.userHead]
	m.user[m.userHead] = nil
	m.userHead++
	switch {
	case m.userHead == len(m.user): // empty: reuse the array from its start
		m.user, m.userHead = m.user[:0], 0
	case m.userHead >= 1024 && m.userHead*2 >= len(m.user): // a long backlog: drop the taken half
		n := copy(m.user, m.user[m.userHead:])
		clear(m.user[n:])
		m.user, m.userHead = m.user[:n], 0
	}
	return msg, false
}

// sysQueued reports whether a system message is queued.
func (m *agentMailbox) sysQueued() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sys) > 0
}
