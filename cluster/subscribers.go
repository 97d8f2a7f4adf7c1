package cluster

import "sync"

// subscribers fans events out to subscriptions, each with an unbounded queue drained by its own
// goroutine, so publishing never blocks the membership owner goroutine.
type subscribers struct {
	// mu guards set and closed.
	mu     sync.Mutex
	set    map[*subscription]struct{}
	closed bool
}

// subscription is one Subscribe call.
type subscription struct {
	out  chan Event
	wake chan struct{} // buffered 1
	done chan struct{} // closed by cancel
	once sync.Once
	wg   sync.WaitGroup

	// mu guards queue.
	mu    sync.Mutex
	queue []Event
}

// add registers a subscription with channel capacity buf and returns its channel and cancel.
func (s *subscribers) add(buf int) (<-chan Event, func()) {
	if buf < 0 {
		buf = 0
	}
	sub := &subscription{
		out:  make(chan Event, buf),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(sub.out)
		return sub.out, func() {}
	}
	if s.set == nil {
		s.set = map[*subscription]struct{}{}
	}
	s.set[sub] = struct{}{}
	s.mu.Unlock()

	sub.wg.Add(1)
	go sub.forward()
	cancel := func() {
		s.mu.Lock()
		delete(s.set, sub)
		s.mu.Unlock()
		sub.stop()
	}
	return sub.out, cancel
}

// publish queues ev for every subscription. It never blocks.
func (s *subscribers) publish(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.set {
		sub.mu.Lock()
		sub.queue = append(sub.queue, Event{Kind: ev.Kind, Member: ev.Member.clone()})
		sub.mu.Unlock()
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// closeAll stops every subscription (closing its channel) and refuses new ones.
func (s *subscribers) closeAll() {
	s.mu.Lock()
	s.closed = true
	subs := s.set
	s.set = nil
	s.mu.Unlock()
	for sub := range subs {
		sub.stop()
	}
}

// stop ends the forwarding goroutine and closes out. Idempotent.
func (sub *subscription) stop() {
	sub.once.Do(func() {
		close(sub.done)
		sub.wg.Wait()
		close(sub.out)
	})
}

// forward drains the queue into out until stopped.
func (sub *subscription) forward() {
	defer sub.wg.Done()
	for {
		sub.mu.Lock()
		var ev Event
		has := len(sub.queue) > 0
		if has {
			ev = sub.queue[0]
			sub.queue = sub.queue[1:]
		}
		sub.mu.Unlock()
		if !has {
			select {
			case <-sub.done:
				return
			case <-sub.wake:
				continue
			}
		}
		select {
		case <-sub.done:
			return
		case sub.out <- ev:
		}
	}
}
