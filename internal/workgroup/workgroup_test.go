package workgroup_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dairuntime/dair/internal/workgroup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGroup_Stop_cancelsAndWaits(t *testing.T) {
	g := workgroup.New()
	var done atomic.Int32
	for i := 0; i < 10; i++ {
		if !g.Go(func(ctx context.Context) {
			<-ctx.Done()
			done.Add(1)
		}) {
			t.Fatal("Go refused before Stop")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := done.Load(); got != 10 {
		t.Fatalf("%d goroutines returned before Stop did, want 10", got)
	}
	if g.Go(func(context.Context) {}) {
		t.Fatal("Go ran work after Stop")
	}
	if g.After(time.Millisecond, func() {}) {
		t.Fatal("After scheduled work after Stop")
	}
}

func TestGroup_Stop_reportsStragglers(t *testing.T) {
	g := workgroup.New()
	release := make(chan struct{})
	g.Go(func(context.Context) { <-release }) // ignores its context
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Stop(ctx); err == nil {
		t.Fatal("Stop returned nil with a goroutine still running")
	}
	close(release)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := g.Stop(ctx2); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestGroup_After_firesOnceOrNeverAfterStop(t *testing.T) {
	g := workgroup.New()
	fired := make(chan struct{}, 2)
	g.After(time.Millisecond, func() { fired <- struct{}{} })
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("timer did not fire")
	}
	// The fired timer accounts for itself just after fn returns.
	for deadline := time.Now().Add(5 * time.Second); g.Running() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("Running = %d after the timer fired, want 0", g.Running())
		}
		time.Sleep(time.Millisecond)
	}
	var late atomic.Bool
	g.After(time.Hour, func() { late.Store(true) })
	if g.Running() != 1 {
		t.Fatalf("Running = %d, want 1 pending timer", g.Running())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if late.Load() {
		t.Fatal("a timer dropped by Stop fired")
	}
}

func TestGroup_Tick_stops(t *testing.T) {
	g := workgroup.New()
	var n atomic.Int32
	stop := g.Tick(time.Millisecond, func() { n.Add(1) })
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n.Load() < 3 {
		t.Fatal("ticker did not tick")
	}
	stop()
	stop() // idempotent
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestGroup_manyTimersRaceWithStop(t *testing.T) {
	for round := 0; round < 20; round++ {
		g := workgroup.New()
		for i := 0; i < 200; i++ {
			g.After(time.Duration(i%3)*time.Microsecond, func() {})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := g.Stop(ctx); err != nil {
			cancel()
			t.Fatalf("round %d: Stop: %v", round, err)
		}
		cancel()
	}
}

// TestEach: every item is handled once, never more than limit at a time.
func TestEach(t *testing.T) {
	for _, limit := range []int{0, 1, 3} {
		items := make([]int, 50)
		for i := range items {
			items[i] = i
		}
		var mu sync.Mutex
		seen, running, most := map[int]int{}, 0, 0
		workgroup.Each(items, limit, func(i int) {
			mu.Lock()
			seen[i]++
			running++
			most = max(most, running)
			mu.Unlock()
			runtime.Gosched() // let others in while this one holds its slot
			mu.Lock()
			running--
			mu.Unlock()
		})
		if len(seen) != len(items) {
			t.Fatalf("limit %d: %d of %d items handled", limit, len(seen), len(items))
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("limit %d: item %d handled %d times", limit, i, n)
			}
		}
		if want := max(limit, 1); most > want {
			t.Fatalf("limit %d: %d at once", limit, most)
		}
	}
}
