package providers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// named is a provider with no capability.
type named string

func (n named) Name() string { return string(n) }

// full implements every capability and records calls.
type full struct {
	name   string
	nilOut bool // return nil results, to test the wrappers' guards

	mu    sync.Mutex
	calls []string
}

func (f *full) Name() string { return f.name }

func (f *full) record(op string) {
	f.mu.Lock()
	f.calls = append(f.calls, op)
	f.mu.Unlock()
}

func (f *full) Dispatch(_ context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	f.record(OpDispatch)
	if f.nilOut {
		return nil
	}
	return &messages.ProviderResult{Ok: true, LocalRunId: "run-" + req.GetSharedRunId()}
}

func (f *full) RunStatus(_ context.Context, _ *messages.CapacityDescriptor, id string) *messages.RunStatus {
	f.record(OpRunStatus)
	if f.nilOut {
		return nil
	}
	return &messages.RunStatus{LocalRunId: id, Status: "running"}
}

func (f *full) QueueStatus(_ context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus {
	f.record(OpQueueStatus)
	if f.nilOut {
		return nil
	}
	return &messages.QueueStatus{QueuedLocalRunIds: []string{"a"}}
}

func (f *full) Control(_ context.Context, _ *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult {
	f.record(OpControl)
	if f.nilOut {
		return nil
	}
	return Success("", "", "")
}

func (f *full) Capacity(context.Context, string) (*messages.CapacityDescriptor, error) {
	return nil, errors.New("not implemented")
}

func (f *full) ListCapacity(context.Context) ([]*messages.CapacityDescriptor, error) {
	return nil, nil
}

func (f *full) ScaleOut(_ context.Context, req *messages.ScaleOutRequest) ScaleOutResult {
	f.record(OpScaleOut)
	if f.nilOut {
		return ScaleOutResult{}
	}
	id := req.GetSettings().GetRuntimeInstanceIdPrefix() + "-1"
	return ScaleOutResult{Result: Success(f.name, id, OpScaleOut), InstanceIDs: []string{id}}
}

func TestRegistry_Register_cases(t *testing.T) {
	tests := []struct {
		name    string
		p       Provider
		wantErr error
	}{
		{name: "valid", p: named("http")},
		{name: "valid with dash and digits", p: named("redis-command-queue2")},
		{name: "duplicate", p: named("local"), wantErr: ErrDuplicateProvider},
		{name: "empty", p: named(""), wantErr: ErrInvalidName},
		{name: "uppercase", p: named("Local"), wantErr: ErrInvalidName},
		{name: "leading digit", p: named("1abc"), wantErr: ErrInvalidName},
		{name: "underscore", p: named("a_b"), wantErr: ErrInvalidName},
		{name: "space", p: named("a b"), wantErr: ErrInvalidName},
		{name: "nil", p: nil, wantErr: ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			if err := r.Register(named("local")); err != nil {
				t.Fatalf("register local: %v", err)
			}
			err := r.Register(tt.p)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Register() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestRegistry_Names_sorted(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"local", "http", "grpc"} {
		if err := r.Register(named(n)); err != nil {
			t.Fatalf("register %s: %v", n, err)
		}
	}
	got := fmt.Sprint(r.Names())
	if got != "[grpc http local]" {
		t.Fatalf("Names() = %s", got)
	}
}

func TestResolve_cases(t *testing.T) {
	r := NewRegistry()
	for _, p := range []Provider{named("bare"), &full{name: "local"}} {
		if err := r.Register(p); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	tests := []struct {
		name       string
		provider   string
		resolve    func(name string) (bool, *messages.ProviderResult)
		wantReason string
		wantOp     string
	}{
		{name: "found dispatcher", provider: "local", resolve: func(n string) (bool, *messages.ProviderResult) {
			p, res := Resolve[Dispatcher](r, n, CapabilityDispatch)
			return p != nil, res
		}},
		{name: "found scale-outer", provider: "local", resolve: func(n string) (bool, *messages.ProviderResult) {
			p, res := Resolve[ScaleOuter](r, n, CapabilityScaleOut)
			return p != nil, res
		}},
		{name: "not found", provider: "http", wantReason: ReasonProviderNotFound, wantOp: "dispatch", resolve: func(n string) (bool, *messages.ProviderResult) {
			p, res := Resolve[Dispatcher](r, n, CapabilityDispatch)
			return p != nil, res
		}},
		{name: "capability missing", provider: "bare", wantReason: ReasonCapabilityNotSupported, wantOp: "scale-out", resolve: func(n string) (bool, *messages.ProviderResult) {
			p, res := Resolve[ScaleOuter](r, n, CapabilityScaleOut)
			return p != nil, res
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, res := tt.resolve(tt.provider)
			if tt.wantReason == "" {
				if !found || res != nil {
					t.Fatalf("found=%v res=%v, want provider", found, res)
				}
				return
			}
			want := &messages.ProviderResult{Provider: tt.provider, Op: tt.wantOp, Reason: tt.wantReason}
			if found || !proto.Equal(res, want) {
				t.Fatalf("found=%v res=%v, want %v", found, res, want)
			}
		})
	}
}

func TestRegistry_ForDescriptor_cases(t *testing.T) {
	tests := []struct {
		name string
		d    *messages.CapacityDescriptor
		want string
	}{
		{name: "nil descriptor", d: nil, want: "local"},
		{name: "empty", d: &messages.CapacityDescriptor{}, want: "local"},
		{name: "strong field", d: &messages.CapacityDescriptor{ProviderName: "http", Metadata: map[string]string{"provider.name": "grpc"}}, want: "http"},
		{name: "metadata", d: &messages.CapacityDescriptor{Metadata: map[string]string{"provider.name": "grpc"}}, want: "grpc"},
		{name: "normalized", d: &messages.CapacityDescriptor{ProviderName: " Actor "}, want: "actor"},
	}
	r := NewRegistry()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.ForDescriptor(tt.d); got != tt.want {
				t.Fatalf("ForDescriptor() = %q, want %q", got, tt.want)
			}
		})
	}
}

type observed struct {
	mu      sync.Mutex
	results []*messages.ProviderResult
}

func (o *observed) observe(res *messages.ProviderResult, _ time.Duration) {
	o.mu.Lock()
	o.results = append(o.results, proto.Clone(res).(*messages.ProviderResult))
	o.mu.Unlock()
}

func (o *observed) last(t *testing.T) *messages.ProviderResult {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.results) == 0 {
		t.Fatal("observer not called")
	}
	return o.results[len(o.results)-1]
}

func TestRegistry_Dispatch_cases(t *testing.T) {
	req := &messages.DispatchRequest{
		SharedRunId:   "sr1",
		CorrelationId: "corr-1",
		Snapshot:      &messages.ExecutionContextSnapshot{TenantId: "tenant-a"},
	}
	tests := []struct {
		name string
		d    *messages.CapacityDescriptor
		want *messages.ProviderResult
	}{
		{
			name: "routes to local by default",
			d:    &messages.CapacityDescriptor{RuntimeInstanceId: "ri-1"},
			want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: OpDispatch, Ok: true, TenantId: "tenant-a", CorrelationId: "corr-1", LocalRunId: "run-sr1"},
		},
		{
			name: "routes by metadata",
			d:    &messages.CapacityDescriptor{RuntimeInstanceId: "ri-2", Metadata: map[string]string{"provider.name": "nilout"}},
			want: &messages.ProviderResult{Provider: "nilout", RuntimeInstanceId: "ri-2", Op: OpDispatch, Reason: ReasonInvalidResponse, TenantId: "tenant-a", CorrelationId: "corr-1"},
		},
		{
			name: "provider missing",
			d:    &messages.CapacityDescriptor{RuntimeInstanceId: "ri-3", ProviderName: "http"},
			want: &messages.ProviderResult{Provider: "http", RuntimeInstanceId: "ri-3", Op: "dispatch", Reason: ReasonProviderNotFound, TenantId: "tenant-a", CorrelationId: "corr-1"},
		},
		{
			name: "capability missing",
			d:    &messages.CapacityDescriptor{RuntimeInstanceId: "ri-4", ProviderName: "bare"},
			want: &messages.ProviderResult{Provider: "bare", RuntimeInstanceId: "ri-4", Op: "dispatch", Reason: ReasonCapabilityNotSupported, TenantId: "tenant-a", CorrelationId: "corr-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &observed{}
			r := NewRegistry(WithObserver(obs.observe))
			for _, p := range []Provider{&full{name: "local"}, &full{name: "nilout", nilOut: true}, named("bare")} {
				if err := r.Register(p); err != nil {
					t.Fatalf("register: %v", err)
				}
			}
			got := r.Dispatch(context.Background(), tt.d, req)
			if !proto.Equal(got, tt.want) {
				t.Fatalf("Dispatch() = %v, want %v", got, tt.want)
			}
			if !proto.Equal(obs.last(t), tt.want) {
				t.Fatalf("observed %v, want %v", obs.last(t), tt.want)
			}
		})
	}
}

func TestRegistry_StatusAndControl_cases(t *testing.T) {
	d := &messages.CapacityDescriptor{RuntimeInstanceId: "ri-1", TenantId: "t1"}
	tests := []struct {
		name     string
		provider Provider
		call     func(r *Registry) *messages.ProviderResult
		want     *messages.ProviderResult
	}{
		{name: "run status ok", provider: &full{name: "local"}, call: func(r *Registry) *messages.ProviderResult {
			st := r.RunStatus(context.Background(), d, "lr1")
			if st.GetLocalRunId() != "lr1" || st.GetStatus() != "running" {
				return Failure("", "", "", "bad-status "+st.GetStatus(), false)
			}
			return st.GetResult()
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: OpRunStatus, Ok: true, TenantId: "t1"}},
		{name: "run status nil", provider: &full{name: "local", nilOut: true}, call: func(r *Registry) *messages.ProviderResult {
			st := r.RunStatus(context.Background(), d, "lr1")
			if st.GetStatus() != RunStatusUnknown {
				return Failure("", "", "", "bad-status "+st.GetStatus(), false)
			}
			return st.GetResult()
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: OpRunStatus, Reason: ReasonInvalidResponse, TenantId: "t1"}},
		{name: "run status unsupported", provider: named("local"), call: func(r *Registry) *messages.ProviderResult {
			return r.RunStatus(context.Background(), d, "lr1").GetResult()
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: "status", Reason: ReasonCapabilityNotSupported, TenantId: "t1"}},
		{name: "queue status ok", provider: &full{name: "local"}, call: func(r *Registry) *messages.ProviderResult {
			return r.QueueStatus(context.Background(), d).GetResult()
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: OpQueueStatus, Ok: true, TenantId: "t1"}},
		{name: "queue status nil", provider: &full{name: "local", nilOut: true}, call: func(r *Registry) *messages.ProviderResult {
			return r.QueueStatus(context.Background(), d).GetResult()
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: OpQueueStatus, Reason: ReasonInvalidResponse, TenantId: "t1"}},
		{name: "control ok", provider: &full{name: "local"}, call: func(r *Registry) *messages.ProviderResult {
			return r.Control(context.Background(), d, &messages.ControlRequest{Op: "pause_queue"})
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: OpControl, Ok: true, TenantId: "t1"}},
		{name: "control unsupported", provider: named("local"), call: func(r *Registry) *messages.ProviderResult {
			return r.Control(context.Background(), d, &messages.ControlRequest{Op: "pause_queue"})
		}, want: &messages.ProviderResult{Provider: "local", RuntimeInstanceId: "ri-1", Op: "control", Reason: ReasonCapabilityNotSupported, TenantId: "t1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &observed{}
			r := NewRegistry(WithObserver(obs.observe))
			if err := r.Register(tt.provider); err != nil {
				t.Fatalf("register: %v", err)
			}
			got := tt.call(r)
			if !proto.Equal(got, tt.want) {
				t.Fatalf("result = %v, want %v", got, tt.want)
			}
			if !proto.Equal(obs.last(t), tt.want) {
				t.Fatalf("observed %v, want %v", obs.last(t), tt.want)
			}
		})
	}
}

func TestRegistry_ScaleOut_selector(t *testing.T) {
	settings := &messages.TenantSettings{TenantId: "tenant-a", RuntimeInstanceIdPrefix: "tenant-a-runtime"}
	tests := []struct {
		name        string
		hint        string
		defaultName string
		registered  []Provider
		wantOK      bool
		wantProv    string
		wantReason  string
	}{
		{name: "hint wins", hint: "http", defaultName: "grpc", registered: []Provider{&full{name: "http"}, &full{name: "grpc"}, &full{name: "local"}}, wantOK: true, wantProv: "http"},
		{name: "default next", defaultName: "grpc", registered: []Provider{&full{name: "grpc"}, &full{name: "local"}}, wantOK: true, wantProv: "grpc"},
		{name: "local last", registered: []Provider{&full{name: "local"}}, wantOK: true, wantProv: "local"},
		{name: "hint not registered", hint: "kubernetes", registered: []Provider{&full{name: "local"}}, wantProv: "kubernetes", wantReason: ReasonProviderNotFound},
		{name: "no scale-out capability", registered: []Provider{named("local")}, wantProv: "local", wantReason: ReasonCapabilityNotSupported},
		{name: "nil result", registered: []Provider{&full{name: "local", nilOut: true}}, wantProv: "local", wantReason: ReasonInvalidResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &observed{}
			r := NewRegistry(WithObserver(obs.observe))
			for _, p := range tt.registered {
				if err := r.Register(p); err != nil {
					t.Fatalf("register: %v", err)
				}
			}
			req := &messages.ScaleOutRequest{RequestId: "so1", Settings: settings, ProviderHint: tt.hint, CorrelationId: "c1"}
			out := r.ScaleOut(context.Background(), req, tt.defaultName)
			res := out.Result
			if res.GetOk() != tt.wantOK || res.GetProvider() != tt.wantProv || res.GetReason() != tt.wantReason {
				t.Fatalf("result = %v, want ok=%v provider=%s reason=%s", res, tt.wantOK, tt.wantProv, tt.wantReason)
			}
			if res.GetTenantId() != "tenant-a" || res.GetCorrelationId() != "c1" || res.GetOp() != OpScaleOut {
				t.Fatalf("result context = %v", res)
			}
			if tt.wantOK && fmt.Sprint(out.InstanceIDs) != "[tenant-a-runtime-1]" {
				t.Fatalf("instance ids = %v", out.InstanceIDs)
			}
			if !proto.Equal(obs.last(t), res) {
				t.Fatalf("observed %v, want %v", obs.last(t), res)
			}
		})
	}
}

func TestCapabilities_full(t *testing.T) {
	tests := []struct {
		name string
		p    Provider
		want string
	}{
		{name: "none", p: named("x"), want: "[]"},
		{name: "all", p: &full{name: "y"}, want: "[dispatch status control capacity scale-out]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(Capabilities(tt.p)); got != tt.want {
				t.Fatalf("Capabilities() = %s, want %s", got, tt.want)
			}
			if Supports(tt.p, Capability("teleport")) {
				t.Fatal("unknown capability supported")
			}
		})
	}
}

func TestRegistry_Register_concurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- r.Register(named(fmt.Sprintf("p%d", i%16)))
		}()
		go func() {
			defer wg.Done()
			r.Dispatch(context.Background(), &messages.CapacityDescriptor{ProviderName: "p1"}, &messages.DispatchRequest{})
		}()
	}
	wg.Wait()
	close(errs)
	var dups int
	for err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrDuplicateProvider):
			dups++
		default:
			t.Fatalf("Register() = %v", err)
		}
	}
	if dups != 16 || len(r.Names()) != 16 {
		t.Fatalf("dups = %d names = %d, want 16 and 16", dups, len(r.Names()))
	}
}
