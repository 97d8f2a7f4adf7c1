package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// tickTo sends msg to pid every d from a timer goroutine until the returned stop function is
// called (once, from the owning actor, typically on Stopping or Restarting). It is how actors
// here get periodic work without blocking their mailbox.
func tickTo(sys *actor.ActorSystem, pid *actor.PID, d time.Duration, msg any) (stop func()) {
	tk := time.NewTicker(d)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-tk.C:
				sys.Root.Send(pid, msg)
			case <-done:
				return
			}
		}
	}()
	return func() { tk.Stop(); close(done) }
}
