package runtimehost_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
	"github.com/dairuntime/dair/testkit"
)

// benchSettings give the benchmarked instance one run slot and a queue deep enough for every
// dispatch.
func benchSettings(n int) *messages.TenantSettings {
	s := tenancy.Defaults("")
	s.LocalQueueCapacity, s.MaxConcurrentRunsPerInstance = int32(n+16), 1
	return s
}

// blockerPipeline holds the benchmarked instance's only run slot for the benchmark's length.
const blockerPipeline = `key: blocker
steps:
  - id: hold
    uses: sleep
    with: {duration: 10m}
`

// startRemoteSystem returns an actor system with protoactor's remote listening on loopback.
func startRemoteSystem(b *testing.B) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	b.Cleanup(func() { r.Shutdown(true); sys.Shutdown() })
	return sys
}

// dispatchTarget returns the provider and descriptor a sub-benchmark dispatches through: the
// instance's queue is paused, so a dispatch ends with the run in the instance's local queue.
func dispatchTarget(b *testing.B, r *testkit.Redis, transport string) (providers.Dispatcher, *messages.CapacityDescriptor) {
	ctx := context.Background()
	settings := benchSettings(b.N)
	var (
		p    providers.Dispatcher
		node *actors.Node
		id   string
	)
	switch transport {
	case "local", "actor":
		id = transport + "-1"
		cfg := actors.Config{Instances: []actors.InstanceSpec{{ID: id, Settings: settings}}}
		if transport == "actor" {
			cfg.System = startRemoteSystem(b)
		}
		node = testkit.StartNode(b, testkit.NodeOptions{Backend: testkit.BackendRedis, Redis: r, Config: cfg})
		lp, _ := node.Providers().Lookup(local.Name)
		p = lp.(providers.Dispatcher)
		if transport == "actor" {
			p = local.New(local.Config{Name: actors.ActorProviderName, System: startRemoteSystem(b), Resolver: actors.RemotePID})
		}
	default:
		rg := startRig(b, r, transport, actors.Config{}, settings)
		node, p, id = rg.node, rg.provider, rg.instance
	}
	lp, _ := node.Providers().Lookup(local.Name)
	ctl := lp.(*local.Provider)
	// A run that sleeps takes the only slot: every benchmarked dispatch then waits in the queue.
	if _, err := node.PutPipeline(ctx, []byte(blockerPipeline)); err != nil {
		b.Fatal(err)
	}
	if _, err := node.Submit(ctx, actors.SubmitRequest{Pipeline: "blocker", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "bench"}}); err != nil {
		b.Fatal(err)
	}
	var qs *messages.QueueStatus
	testkit.Eventually(b, 30*time.Second, 10*time.Millisecond, func() bool {
		qs = ctl.QueueStatus(ctx, &messages.CapacityDescriptor{RuntimeInstanceId: id})
		return qs.GetCapacity() != nil && len(qs.GetRunningLocalRunIds()) == 1
	}, "the blocker runs on %s", id)
	return p, qs.GetCapacity()
}

// BenchmarkDispatch measures one provider dispatch, from the call to the run in the target
// instance's local queue (its queue paused, so nothing runs), per transport: /local (in-process
// PID), /actor (protoactor remote between two actor systems), /http, /grpc and
// /redis-command-queue (real sockets and a real redis-server). Dispatches are sequential.
func BenchmarkDispatch(b *testing.B) {
	testkit.RequireRedis(b)
	r := testkit.StartRedis(b, testkit.RedisOptions{})
	for _, transport := range []string{"local", "actor", "http", "grpc", "redis-command-queue"} {
		b.Run(transport, func(b *testing.B) {
			p, d := dispatchTarget(b, r, transport)
			snap := &messages.ExecutionContextSnapshot{TenantId: "bench", Source: "bench"}
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				req := &messages.DispatchRequest{RuntimeInstanceId: d.RuntimeInstanceId, SharedRunId: fmt.Sprintf("run-%d", i),
					PipelineKey: "bench", Snapshot: snap, Source: "bench"}
				t0 := time.Now()
				res := p.Dispatch(ctx, d, req)
				lat = append(lat, time.Since(t0))
				if !res.GetOk() {
					b.Fatalf("dispatch %d through %s: %s", i, transport, res.GetReason())
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "dispatches/s")
			testkit.ReportLatency(b, lat)
		})
	}
}
