package actors

import (
	"testing"
	"time"
)

func TestDeadlineWheel_wait(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	w := newDeadlineWheel(t0)
	if ch := w.wait(t0.Add(-time.Second)); ch != nil {
		t.Fatal("a passed deadline got a wheel channel, want nil (timer)")
	}
	soon := w.wait(t0.Add(12 * time.Millisecond))
	if soon == nil || w.wait(t0.Add(13*time.Millisecond)) != soon {
		t.Fatal("deadlines in one tick must share its channel")
	}
	far := w.wait(t0.Add(time.Hour)) // beyond the horizon: the last slot
	w.advance(t0.Add(10 * time.Millisecond))
	select {
	case <-soon:
		t.Fatal("closed before its tick passed")
	default:
	}
	w.advance(t0.Add(15 * time.Millisecond))
	select {
	case <-soon:
	default:
		t.Fatal("not closed once its tick passed")
	}
	w.advance(t0.Add(deadlineSlots * deadlineTick))
	select {
	case <-far:
	default:
		t.Fatal("a deadline beyond the horizon must wake at the horizon")
	}
}

func TestDeadlineWheel_stop_wakesWaitersAndLaterWaits(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	w := newDeadlineWheel(t0)
	near, far := w.wait(t0.Add(20*time.Millisecond)), w.wait(t0.Add(time.Hour))
	w.stop()
	w.stop() // idempotent
	for _, ch := range []<-chan struct{}{near, far, w.wait(t0.Add(time.Minute))} {
		select {
		case <-ch:
		default:
			t.Fatal("a wait before or after stop is not woken")
		}
	}
}
