package cluster

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/messages"
)

// startRemotePair starts two in-process nodes with real protoactor remotes on loopback, B
// serving pongName and a counter actor, and waits until A sees B. Not for -race (see
// startPeer): the tests cover Ping/Pong over a real remote with the peer in another process
// (TestMembership_Remote_pingPongAcrossNodes), which runs under -race; this pair serves
// BenchmarkClusterMessages only.
func startRemotePair(tb testing.TB) (a, b *testNode) {
	tb.Helper()
	a = startNodeCfg(tb, Config{NodeID: "node-a"}, false)
	b = startNodeCfg(tb, Config{NodeID: "node-b", Join: []string{a.addr()}}, false)
	eventually(tb, 10*time.Second, func() bool { return len(a.m.Members()) == 2 }, "b joins a")
	if _, err := b.sys.Root.SpawnNamed(pongProps(), pongName); err != nil {
		tb.Fatalf("spawn pong: %v", err)
	}
	return a, b
}

// BenchmarkClusterMessages measures *messages.Ping between two in-process actor systems
// connected by protoactor remote on loopback: one-way throughput (msgs/s) and request/response
// round-trip latency (p50-ns, p99-ns).
func BenchmarkClusterMessages(b *testing.B) {
	if raceEnabled {
		b.Skip("two in-process protoactor remotes race on grpc's global logger")
	}
	na, nb := startRemotePair(b)
	pongPID := actor.NewPID(nb.m.Self().Address, pongName)
	if _, err := na.sys.Root.RequestFuture(pongPID, &messages.Ping{}, 5*time.Second).Result(); err != nil {
		b.Fatalf("warm-up request: %v", err)
	}

	b.Run("oneway", func(b *testing.B) {
		var count, target atomic.Int64
		done := make(chan struct{}, 1)
		target.Store(int64(b.N))
		counter, err := nb.sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*messages.Ping); ok && count.Add(1) == target.Load() {
				done <- struct{}{}
			}
		}), "counter")
		if err != nil {
			b.Fatalf("spawn counter: %v", err)
		}
		defer func() {
			if err := nb.sys.Root.StopFuture(counter).Wait(); err != nil {
				b.Errorf("stop counter: %v", err)
			}
		}()
		remoteCounter := actor.NewPID(nb.m.Self().Address, counter.Id)
		ping := &messages.Ping{Seq: 1}
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			na.sys.Root.Send(remoteCounter, ping)
		}
		timer := time.NewTimer(60 * time.Second)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			b.Fatalf("received %d of %d pings", count.Load(), b.N)
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	})

	b.Run("rtt", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			if _, err := na.sys.Root.RequestFuture(pongPID, &messages.Ping{Seq: int64(i)}, 5*time.Second).Result(); err != nil {
				b.Fatalf("request %d: %v", i, err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	})
}
