package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/testkit/leak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leak.Protoactor()...)
}

// fixture starts instance actors: "ri-ok" answers, "ri-silent" never answers, "ri-wrong"
// answers with a wrong type, "ri-dead" is a stopped actor's PID.
func fixture(t *testing.T) (*actor.ActorSystem, *directory) {
	t.Helper()
	system := newSystem(t)
	dir := newDirectory()
	dir.put("ri-ok", spawn(t, system, instanceActor("ri-ok")))
	dir.put("ri-silent", spawn(t, system, func(actor.Context) {}))
	dir.put("ri-wrong", spawn(t, system, func(ctx actor.Context) {
		if _, ok := ctx.Message().(proto.Message); ok {
			ctx.Respond("not a proto answer")
		}
	}))
	dead := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := system.Root.StopFuture(dead).Wait(); err != nil {
		t.Fatalf("stop dead: %v", err)
	}
	dir.put("ri-dead", dead)
	return system, dir
}

func desc(id string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, ProviderName: Name}
}

func TestProvider_Dispatch_cases(t *testing.T) {
	system, dir := fixture(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	req := &messages.DispatchRequest{SharedRunId: "sr1", Snapshot: &messages.ExecutionContextSnapshot{TenantId: "tenant-a"}}
	tests := []struct {
		name string
		cfg  Config
		ctx  context.Context
		id   string
		req  *messages.DispatchRequest
		want *messages.ProviderResult
	}{
		{name: "delivered", id: "ri-ok", req: req,
			want: &messages.ProviderResult{Provider: Name, RuntimeInstanceId: "ri-ok", Op: providers.OpDispatch, Ok: true, LocalRunId: "lr-sr1", TenantId: "tenant-a"}},
		{name: "instance not found", id: "ri-missing", req: req,
			want: providers.Failure(Name, "ri-missing", providers.OpDispatch, providers.ReasonInstanceNotFound, true)},
		{name: "timeout", id: "ri-silent", req: req,
			want: providers.Failure(Name, "ri-silent", providers.OpDispatch, providers.ReasonDispatchTimeout, true)},
		{name: "wrong answer", id: "ri-wrong", req: req,
			want: providers.Failure(Name, "ri-wrong", providers.OpDispatch, providers.ReasonInvalidResponse, false)},
		{name: "dead letter", id: "ri-dead", req: req,
			want: providers.Failure(Name, "ri-dead", providers.OpDispatch, providers.ReasonInstanceUnreachable, true)},
		{name: "canceled", id: "ri-ok", req: req, ctx: canceled,
			want: providers.Failure(Name, "ri-ok", providers.OpDispatch, providers.ReasonCanceled, true)},
		{name: "nil request", id: "ri-ok",
			want: providers.Failure(Name, "ri-ok", providers.OpDispatch, providers.ReasonInvalidRequest, false)},
		{name: "no instance id", req: req,
			want: providers.Failure(Name, "", providers.OpDispatch, providers.ReasonInvalidRequest, false)},
		{name: "misconfigured", cfg: Config{Directory: dir}, id: "ri-ok", req: req,
			want: providers.Failure(Name, "ri-ok", providers.OpDispatch, providers.ReasonMisconfigured, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.Directory == nil {
				cfg = Config{System: system, Directory: dir, RequestTimeout: 100 * time.Millisecond}
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			got := New(cfg).Dispatch(ctx, desc(tt.id), tt.req)
			if !proto.Equal(got, tt.want) {
				t.Fatalf("Dispatch() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProvider_Dispatch_ctxDeadlineBoundsTimeout(t *testing.T) {
	system, dir := fixture(t)
	p := New(Config{System: system, Directory: dir, RequestTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	got := p.Dispatch(ctx, desc("ri-silent"), &messages.DispatchRequest{SharedRunId: "sr"})
	if got.GetOk() || !got.GetRetryable() || time.Since(start) > 5*time.Second {
		t.Fatalf("Dispatch() = %v after %v", got, time.Since(start))
	}
}

func TestProvider_RunStatus_cases(t *testing.T) {
	system, dir := fixture(t)
	p := New(Config{System: system, Directory: dir, RequestTimeout: 100 * time.Millisecond})
	tests := []struct {
		name       string
		id         string
		wantStatus string
		wantResult *messages.ProviderResult
	}{
		{name: "answered", id: "ri-ok", wantStatus: messages.RunRunning,
			wantResult: providers.Success(Name, "ri-ok", providers.OpRunStatus)},
		{name: "missing", id: "ri-missing", wantStatus: providers.RunStatusUnknown,
			wantResult: providers.Failure(Name, "ri-missing", providers.OpRunStatus, providers.ReasonInstanceNotFound, true)},
		{name: "timeout", id: "ri-silent", wantStatus: providers.RunStatusUnknown,
			wantResult: providers.Failure(Name, "ri-silent", providers.OpRunStatus, providers.ReasonRequestTimeout, true)},
		{name: "wrong answer", id: "ri-wrong", wantStatus: providers.RunStatusUnknown,
			wantResult: providers.Failure(Name, "ri-wrong", providers.OpRunStatus, providers.ReasonInvalidResponse, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.RunStatus(context.Background(), desc(tt.id), "lr-7")
			if got.GetLocalRunId() != "lr-7" || got.GetStatus() != tt.wantStatus || !proto.Equal(got.GetResult(), tt.wantResult) {
				t.Fatalf("RunStatus() = %v, want status %s result %v", got, tt.wantStatus, tt.wantResult)
			}
		})
	}
}

func TestProvider_QueueStatus_cases(t *testing.T) {
	system, dir := fixture(t)
	p := New(Config{System: system, Directory: dir, RequestTimeout: 100 * time.Millisecond})
	tests := []struct {
		name       string
		id         string
		wantQueued int
		wantResult *messages.ProviderResult
	}{
		{name: "answered", id: "ri-ok", wantQueued: 1, wantResult: providers.Success(Name, "ri-ok", providers.OpQueueStatus)},
		{name: "missing", id: "ri-missing",
			wantResult: providers.Failure(Name, "ri-missing", providers.OpQueueStatus, providers.ReasonInstanceNotFound, true)},
		{name: "wrong answer", id: "ri-wrong",
			wantResult: providers.Failure(Name, "ri-wrong", providers.OpQueueStatus, providers.ReasonInvalidResponse, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.QueueStatus(context.Background(), desc(tt.id))
			if len(got.GetQueuedLocalRunIds()) != tt.wantQueued || !proto.Equal(got.GetResult(), tt.wantResult) {
				t.Fatalf("QueueStatus() = %v, want %d queued, result %v", got, tt.wantQueued, tt.wantResult)
			}
		})
	}
}

func TestProvider_Control_cases(t *testing.T) {
	system, dir := fixture(t)
	p := New(Config{System: system, Directory: dir, RequestTimeout: 100 * time.Millisecond})
	tests := []struct {
		name string
		id   string
		req  *messages.ControlRequest
		want *messages.ProviderResult
	}{
		{name: "instance id filled", id: "ri-ok", req: &messages.ControlRequest{Op: "pause_queue"},
			want: providers.Success(Name, "ri-ok", providers.OpControl)},
		{name: "no op", id: "ri-ok", req: &messages.ControlRequest{},
			want: providers.Failure(Name, "ri-ok", providers.OpControl, providers.ReasonInvalidRequest, false)},
		{name: "missing", id: "ri-missing", req: &messages.ControlRequest{Op: "drain_queue"},
			want: providers.Failure(Name, "ri-missing", providers.OpControl, providers.ReasonInstanceNotFound, true)},
		{name: "timeout", id: "ri-silent", req: &messages.ControlRequest{Op: "drain_queue"},
			want: providers.Failure(Name, "ri-silent", providers.OpControl, providers.ReasonRequestTimeout, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Control(context.Background(), desc(tt.id), tt.req)
			if !proto.Equal(got, tt.want) {
				t.Fatalf("Control() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfig_Validate_cases(t *testing.T) {
	system := newSystem(t)
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{name: "ok", cfg: Config{System: system, Directory: newDirectory()}},
		{name: "no system", cfg: Config{Directory: newDirectory()}, want: ErrNoSystem},
		{name: "no directory", cfg: Config{System: system}, want: ErrNoDirectory},
		{name: "host without listing", cfg: Config{System: system, Directory: newDirectory(), Host: &host{}}, want: ErrNoInstances},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestProvider_Registry_routesLocal(t *testing.T) {
	system, dir := fixture(t)
	reg := providers.NewRegistry()
	if err := reg.Register(New(Config{System: system, Directory: dir})); err != nil {
		t.Fatalf("Register() = %v", err)
	}
	d := &messages.CapacityDescriptor{RuntimeInstanceId: "ri-ok", Metadata: map[string]string{"provider.name": "local"}}
	got := reg.Dispatch(context.Background(), d, &messages.DispatchRequest{SharedRunId: "sr9", CorrelationId: "c9"})
	if !got.GetOk() || got.GetProvider() != Name || got.GetLocalRunId() != "lr-sr9" || got.GetCorrelationId() != "c9" {
		t.Fatalf("Dispatch() = %v", got)
	}
}
