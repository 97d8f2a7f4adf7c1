package actors_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

// Agent benchmarks: msgs/s of sends under many concurrent senders (each send waits for the
// agent's reply), the round trip of one send at a time (p50-ns, p99-ns: nothing else in flight,
// so it measures latency, not queueing), and deliveries/s of a publish to 1,000 subscribers on 3 workers (reported as msgs/s,
// counted when the agents handled them). The cross-node variants run two or four in-process
// nodes joined by memberlist and protoactor remote on loopback; several remotes in one process
// race on grpc's global logger, so they do not run under -race.

// benchKeys spreads the senders over this many agents.
const benchKeys = 1024

// sendConcurrency is the number of senders in flight in the throughput phase.
const sendConcurrency = 1024

// rttSends is the number of one-at-a-time sends of the latency phase (at most b.N).
const rttSends = 20000

func BenchmarkAgentSend(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		n := testkit.StartNode(b, testkit.NodeOptions{Config: actors.Config{Roles: []string{actors.RoleRuntime},
			AgentTypes: []string{actors.AgentEcho}}})
		benchSends(b, n, sendConcurrency)
	})
	b.Run("cross-node", func(b *testing.B) {
		if raceEnabled {
			b.Skip("several in-process protoactor remotes race on grpc's global logger")
		}
		c := testkit.StartAgentCluster(b, testkit.AgentClusterOptions{N: 2, Types: [][]string{nil, {actors.AgentEcho}}})
		benchSends(b, c.Node(0).Node, sendConcurrency)
	})
	b.Run("local-batch", func(b *testing.B) {
		n := testkit.StartNode(b, testkit.NodeOptions{Config: actors.Config{Roles: []string{actors.RoleRuntime},
			AgentTypes: []string{actors.AgentEcho}}})
		benchBatches(b, n)
	})
	b.Run("cross-node-batch", func(b *testing.B) {
		if raceEnabled {
			b.Skip("several in-process protoactor remotes race on grpc's global logger")
		}
		c := testkit.StartAgentCluster(b, testkit.AgentClusterOptions{N: 2, Types: [][]string{nil, {actors.AgentEcho}}})
		benchBatches(b, c.Node(0).Node)
	})
}

// batchSenders and batchSize shape the batch benchmarks: sendConcurrency messages in flight,
// in batchSenders SendAgentBatch calls of batchSize envelopes over the benchKeys agents.
const (
	batchSenders = 4
	batchSize    = sendConcurrency / batchSenders
)

// benchBatches sends b.N echo messages from n in batches (batchSenders callers, batchSize
// envelopes each) and reports msgs/s and the p50 of one batch's round trip under that load.
func benchBatches(b *testing.B, n *actors.Node) {
	ctx := context.Background()
	snap := &messages.ExecutionContextSnapshot{TenantId: "bench"}
	ids := make([]*messages.AgentId, benchKeys)
	for i := range ids {
		ids[i] = &messages.AgentId{Type: actors.AgentEcho, Key: "k" + strconv.Itoa(i)}
	}
	batch := func(from, to int64) ([]*messages.DeliveryOutcome, error) {
		envs := make([]*messages.MessageEnvelope, 0, to-from)
		for i := from; i < to; i++ {
			envs = append(envs, &messages.MessageEnvelope{Recipient: ids[i%benchKeys], Payload: []byte(`{"n":1}`),
				ContentType: "application/json", Snapshot: snap})
		}
		return n.SendAgentBatch(ctx, envs)
	}
	if outs, err := batch(0, benchKeys); err != nil || outs[0].Status != messages.DeliveryOutcome_DELIVERED {
		b.Fatalf("warm-up batch: %v", err)
	}
	var next atomic.Int64
	elapsed, all := timedSenders(b, batchSenders, func(lat *[]time.Duration, failed *atomic.Int64) {
		for end := next.Add(batchSize); end-batchSize < int64(b.N); end = next.Add(batchSize) {
			from, to := end-batchSize, min(end, int64(b.N))
			t0 := time.Now()
			outs, err := batch(from, to)
			*lat = append(*lat, time.Since(t0))
			for _, o := range outs {
				if o.Status != messages.DeliveryOutcome_DELIVERED {
					failed.Add(1)
				}
			}
			if err != nil {
				failed.Add(to - from)
			}
		}
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(all[len(all)/2]), "batch-p50-ns")
}

// timedSenders runs `callers` goroutines of send (each appending its latencies to lat and
// counting undelivered messages in failed) as the timed part of b, logs the CPU per message and
// fails b if any of its b.N messages was not delivered. It returns the wall time and every
// latency, sorted.
func timedSenders(b *testing.B, callers int, send func(lat *[]time.Duration, failed *atomic.Int64)) (time.Duration, []time.Duration) {
	var failed atomic.Int64
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(&lat[g], &failed)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	logCPU(b, cpu0, b.N, elapsed)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d sends not delivered", f, b.N)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return elapsed, all
}

// benchSends sends b.N echo messages from n with `conc` senders and reports msgs/s (and the
// p50 under that load), then sends up to rttSends messages one at a time and reports their round
// trip's p50 and p99.
func benchSends(b *testing.B, n *actors.Node, conc int) {
	ctx := context.Background()
	snap := &messages.ExecutionContextSnapshot{TenantId: "bench"}
	ids := make([]*messages.AgentId, benchKeys)
	for i := range ids {
		ids[i] = &messages.AgentId{Type: actors.AgentEcho, Key: "k" + strconv.Itoa(i)}
		if o, err := n.SendAgent(ctx, ids[i], []byte("warm"), snap, 10*time.Second); err != nil || o.Status != messages.DeliveryOutcome_DELIVERED {
			b.Fatalf("warm-up send: %v %v", o, err)
		}
	}
	payload := []byte(`{"n":1}`)
	var next atomic.Int64
	elapsed, loaded := timedSenders(b, conc, func(lat *[]time.Duration, failed *atomic.Int64) {
		*lat = make([]time.Duration, 0, b.N/conc+1)
		for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
			t0 := time.Now()
			o, err := n.SendAgent(ctx, ids[i%benchKeys], payload, snap, 10*time.Second)
			*lat = append(*lat, time.Since(t0))
			if err != nil || o.Status != messages.DeliveryOutcome_DELIVERED {
				failed.Add(1)
			}
		}
	})
	if d, err := n.AgentDirectory(ctx); err == nil {
		for _, w := range d.Workers {
			if w.SendBatches > 0 {
				b.Logf("%.1f sends per request to worker %s", float64(b.N+benchKeys)/float64(w.SendBatches), w.NodeID)
			}
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(loaded[len(loaded)/2]), "loaded-p50-ns")
	rtt := make([]time.Duration, 0, min(b.N, rttSends))
	for i := range cap(rtt) {
		t0 := time.Now()
		o, err := n.SendAgent(ctx, ids[i%benchKeys], payload, snap, 10*time.Second)
		rtt = append(rtt, time.Since(t0))
		if err != nil || o.Status != messages.DeliveryOutcome_DELIVERED {
			b.Fatalf("one-at-a-time send: %v %v", o, err)
		}
	}
	slices.Sort(rtt)
	b.ReportMetric(float64(rtt[len(rtt)/2]), "p50-ns")
	b.ReportMetric(float64(rtt[len(rtt)*99/100]), "p99-ns")
}

// reportAgentLatency reports msgs/s for count messages in elapsed and the p50/p99 of lat.
func reportAgentLatency(b *testing.B, lat []time.Duration, count int, elapsed time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(count)/elapsed.Seconds(), "msgs/s")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	}
}

func BenchmarkAgentPublish(b *testing.B) {
	if raceEnabled {
		b.Skip("several in-process protoactor remotes race on grpc's global logger")
	}
	const subscribers = 1000
	c := testkit.StartAgentCluster(b, testkit.AgentClusterOptions{N: 4})
	ctx := context.Background()
	var handled atomic.Int64
	sink := func(context.Context, *actors.Agent, *messages.MessageEnvelope) ([]byte, error) {
		handled.Add(1)
		return nil, nil
	}
	for _, w := range c.Nodes()[1:] {
		if err := w.Node.RegisterAgentType(ctx, "sink", sink); err != nil {
			b.Fatal(err)
		}
	}
	router := c.Node(0).Node
	subs := make([]*messages.Subscription, subscribers)
	for i := range subs {
		subs[i] = &messages.Subscription{TenantId: "bench", Topic: "news", AgentType: "sink", AgentKey: "s" + strconv.Itoa(i)}
	}
	if _, err := router.Subscribe(ctx, subs...); err != nil {
		b.Fatal(err)
	}
	snap := &messages.ExecutionContextSnapshot{TenantId: "bench"}
	topic := &messages.TopicId{Type: "news"}
	if d, err := router.PublishAgent(ctx, topic, nil, snap); err != nil || d != subscribers {
		b.Fatalf("warm-up publish: %d %v", d, err)
	}
	testkit.Eventually(b, 10*time.Second, time.Millisecond, func() bool { return handled.Load() == subscribers }, "warm-up handled")
	handled.Store(0)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	for range b.N {
		t0 := time.Now()
		if d, err := router.PublishAgent(ctx, topic, []byte(`{}`), snap); err != nil || d != subscribers {
			b.Fatalf("publish: %d %v", d, err)
		}
		lat = append(lat, time.Since(t0))
	}
	want := int64(b.N) * subscribers
	testkit.Eventually(b, time.Minute, 100*time.Microsecond, func() bool { return handled.Load() == want }, "every delivery handled")
	elapsed := time.Since(start)
	b.StopTimer()
	logCPU(b, cpu0, int(want), elapsed)
	reportAgentLatency(b, lat, int(want), elapsed)
}

// processCPU returns the CPU time (user + system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// logCPU logs the CPU time per message since cpu0 and the rate two dedicated cores would
// sustain at that cost: on a shared machine the wall-clock rate understates the runtime.
func logCPU(b *testing.B, cpu0 time.Duration, count int, elapsed time.Duration) {
	perMsg := (processCPU(b) - cpu0) / time.Duration(max(count, 1))
	b.Logf("%d msgs in %v: %v CPU per msg (%.0f msgs/s on 2 dedicated cores)", count, elapsed, perMsg, 2/perMsg.Seconds())
}

// BenchmarkRemotePingPong is the floor of the cross-node agent send, measured the same way:
// raw protoactor request/response (RequestFuture of a *messages.Ping to a pong actor on the
// other node of the same two-node agent cluster) with sendConcurrency senders for msgs/s, then
// rttSends requests one at a time for p50-ns and p99-ns.
func BenchmarkRemotePingPong(b *testing.B) {
	if raceEnabled {
		b.Skip("several in-process protoactor remotes race on grpc's global logger")
	}
	c := testkit.StartAgentCluster(b, testkit.AgentClusterOptions{N: 2, Types: [][]string{nil, {actors.AgentEcho}}})
	far := c.Node(1).Node.System()
	pong, err := far.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*messages.Ping); ok {
			ctx.Respond(&messages.Pong{Seq: p.Seq})
		}
	}), "bench-pong")
	if err != nil {
		b.Fatal(err)
	}
	root := c.Node(0).Node.System().Root
	target := actor.NewPID(far.Address(), pong.Id)
	ping := func(i int64) time.Duration {
		t0 := time.Now()
		if _, err := root.RequestFuture(target, &messages.Ping{Seq: i}, 10*time.Second).Result(); err != nil {
			b.Errorf("ping %d: %v", i, err)
		}
		return time.Since(t0)
	}
	ping(0)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	for range sendConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				ping(i)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	logCPU(b, cpu0, b.N, elapsed)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	rtt := make([]time.Duration, 0, min(b.N, rttSends))
	for i := range cap(rtt) {
		rtt = append(rtt, ping(int64(i)))
	}
	slices.Sort(rtt)
	b.ReportMetric(float64(rtt[len(rtt)/2]), "p50-ns")
	b.ReportMetric(float64(rtt[len(rtt)*99/100]), "p99-ns")
}
