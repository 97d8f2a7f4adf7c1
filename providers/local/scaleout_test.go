package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

var (
	tenantA = &messages.TenantSettings{TenantId: "tenant-a", TenantGroupId: "enterprise", IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIdPrefix: "tenant-a-runtime", MaxRuntimeInstances: 3}
	tenantB = &messages.TenantSettings{TenantId: "tenant-b", IsolationMode: messages.IsolationHybrid, AllowSharedFallback: true,
		RuntimeInstanceIdPrefix: "tenant-b-runtime", MaxRuntimeInstances: 2}
	sharedTenant = &messages.TenantSettings{TenantId: "test-tenant", IsolationMode: messages.IsolationShared,
		RuntimeInstanceIdPrefix: "runtime-instance", MaxRuntimeInstances: 1}
)

func inst(id, status, tenant, group, mode, prefix string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, Status: status, TenantId: tenant, TenantGroupId: group,
		IsolationMode: mode, RuntimeInstanceIdPrefix: prefix, ProviderName: Name}
}

func sharedInst(id string) *messages.CapacityDescriptor {
	return inst(id, messages.InstanceReady, "", "", messages.IsolationShared, "runtime-instance")
}

func tenantAInst(id string) *messages.CapacityDescriptor {
	return inst(id, messages.InstanceReady, "tenant-a", "enterprise", messages.IsolationDedicated, "tenant-a-runtime")
}

func TestProvider_ScaleOut_cases(t *testing.T) {
	tests := []struct {
		name       string
		existing   []*messages.CapacityDescriptor
		settings   *messages.TenantSettings
		hostFail   bool
		neverUp    bool
		noHost     bool
		listErr    error
		inUse      []string // ids InUse reports as still referenced
		inUseErr   error
		wantID     string
		wantReason string
	}{
		{name: "dedicated ignores shared instance", existing: []*messages.CapacityDescriptor{sharedInst("runtime-instance-1")},
			settings: tenantA, wantID: "tenant-a-runtime-1"},
		{name: "dedicated second instance", existing: []*messages.CapacityDescriptor{tenantAInst("tenant-a-runtime-1")},
			settings: tenantA, wantID: "tenant-a-runtime-2"},
		{name: "fills gap", existing: []*messages.CapacityDescriptor{tenantAInst("tenant-a-runtime-1"), tenantAInst("tenant-a-runtime-3")},
			settings: tenantA, wantID: "tenant-a-runtime-2"},
		{name: "dedicated at max", existing: []*messages.CapacityDescriptor{
			tenantAInst("tenant-a-runtime-1"), tenantAInst("tenant-a-runtime-2"), tenantAInst("tenant-a-runtime-3")},
			settings: tenantA, wantReason: providers.ReasonMaxRuntimeInstancesReached},
		{name: "group member's instance counts", existing: []*messages.CapacityDescriptor{
			inst("tenant-a-runtime-1", messages.InstanceReady, "tenant-a2", "enterprise", messages.IsolationDedicated, "tenant-a-runtime"),
			tenantAInst("tenant-a-runtime-2"), tenantAInst("tenant-a-runtime-3")},
			settings: tenantA, wantReason: providers.ReasonMaxRuntimeInstancesReached},
		{name: "other tenant's instance with same prefix not counted but id taken", existing: []*messages.CapacityDescriptor{
			inst("tenant-a-runtime-1", messages.InstanceReady, "intruder", "", messages.IsolationDedicated, "tenant-a-runtime"),
			tenantAInst("tenant-a-runtime-2"), tenantAInst("tenant-a-runtime-3")},
			settings: tenantA, wantID: "tenant-a-runtime-4"},
		{name: "stopped instance frees its id and slot", existing: []*messages.CapacityDescriptor{
			inst("tenant-a-runtime-1", messages.InstanceStopped, "tenant-a", "enterprise", messages.IsolationDedicated, "tenant-a-runtime"),
			tenantAInst("tenant-a-runtime-2"), tenantAInst("tenant-a-runtime-3")},
			settings: tenantA, wantID: "tenant-a-runtime-1"},
		{name: "hybrid ignores shared and dedicated", existing: []*messages.CapacityDescriptor{
			sharedInst("runtime-instance-1"), tenantAInst("tenant-a-runtime-1")},
			settings: tenantB, wantID: "tenant-b-runtime-1"},
		{name: "hybrid at max", existing: []*messages.CapacityDescriptor{
			inst("tenant-b-runtime-1", messages.InstanceReady, "tenant-b", "", messages.IsolationHybrid, "tenant-b-runtime"),
			inst("tenant-b-runtime-2", messages.InstanceStarting, "tenant-b", "", messages.IsolationHybrid, "tenant-b-runtime")},
			settings: tenantB, wantReason: providers.ReasonMaxRuntimeInstancesReached},
		{name: "shared first instance", existing: []*messages.CapacityDescriptor{tenantAInst("tenant-a-runtime-1")},
			settings: sharedTenant, wantID: "runtime-instance-1"},
		{name: "shared at max", existing: []*messages.CapacityDescriptor{sharedInst("runtime-instance-1")},
			settings: sharedTenant, wantReason: providers.ReasonMaxRuntimeInstancesReached},
		{name: "prefix from id when field empty", existing: []*messages.CapacityDescriptor{
			inst("runtime-instance-1", messages.InstanceReady, "", "", "", "")},
			settings: sharedTenant, wantReason: providers.ReasonMaxRuntimeInstancesReached},
		{name: "default prefix and max", settings: &messages.TenantSettings{TenantId: "unknown"}, wantID: "runtime-instance-1"},
		{name: "no host", settings: tenantA, noHost: true, wantReason: providers.ReasonNoScaler},
		{name: "host fails", settings: tenantA, hostFail: true, wantID: "tenant-a-runtime-1", wantReason: providers.ReasonHostCreateFailed},
		{name: "never ready", settings: tenantA, neverUp: true, wantID: "tenant-a-runtime-1", wantReason: providers.ReasonInstanceNotReady},
		{name: "listing fails", settings: tenantA, listErr: errors.New("redis down"), wantReason: providers.ReasonListInstancesFailed},
		{name: "no settings", wantReason: providers.ReasonInvalidRequest},
		{name: "id of a departed instance still in use is skipped", existing: []*messages.CapacityDescriptor{tenantAInst("tenant-a-runtime-2")},
			settings: tenantA, inUse: []string{"tenant-a-runtime-1"}, wantID: "tenant-a-runtime-3"},
		{name: "in-use check fails", settings: tenantA, inUseErr: errors.New("redis down"), wantReason: providers.ReasonListInstancesFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system := newSystem(t)
			dir := newDirectory()
			reg := &registry{list: tt.existing, listErr: tt.listErr}
			h := &host{t: t, system: system, dir: dir, reg: reg, fail: tt.hostFail, neverUp: tt.neverUp}
			t.Cleanup(h.wg.Wait)
			cfg := Config{System: system, Directory: dir, Host: h, Instances: reg.Instances, ReadyTimeout: 100 * time.Millisecond}
			if tt.noHost {
				cfg.Host = nil
			}
			if tt.inUse != nil || tt.inUseErr != nil {
				cfg.InUse = func(_ context.Context, id string) (bool, error) { return slices.Contains(tt.inUse, id), tt.inUseErr }
			}
			req := &messages.ScaleOutRequest{RequestId: "so-1", Settings: tt.settings, CorrelationId: "corr"}
			out := New(cfg).ScaleOut(context.Background(), req)
			res := out.Result
			wantOK := tt.wantReason == ""
			if res.GetOk() != wantOK || res.GetReason() != tt.wantReason || res.GetRuntimeInstanceId() != tt.wantID {
				t.Fatalf("ScaleOut() = %v, want ok=%v reason=%q id=%q", res, wantOK, tt.wantReason, tt.wantID)
			}
			if res.GetProvider() != Name || res.GetOp() != providers.OpScaleOut || res.GetCorrelationId() != "corr" ||
				res.GetTenantId() != tt.settings.GetTenantId() {
				t.Fatalf("result context = %v", res)
			}
			if wantOK {
				if fmt.Sprint(out.InstanceIDs) != "["+tt.wantID+"]" {
					t.Fatalf("InstanceIDs = %v", out.InstanceIDs)
				}
				if got := h.createdIDs(); !slices.Equal(got, []string{tt.wantID}) || h.requests[0] != "so-1" {
					t.Fatalf("host created %v for %v", got, h.requests)
				}
			} else if len(out.InstanceIDs) != 0 {
				t.Fatalf("InstanceIDs = %v on failure", out.InstanceIDs)
			}
		})
	}
}

func TestProvider_ScaleOut_concurrentRespectsMax(t *testing.T) {
	system := newSystem(t)
	dir := newDirectory()
	reg := &registry{list: []*messages.CapacityDescriptor{sharedInst("runtime-instance-1")}}
	h := &host{t: t, system: system, dir: dir, reg: reg}
	t.Cleanup(h.wg.Wait)
	p := New(Config{System: system, Directory: dir, Host: h, Instances: reg.Instances})

	const callers = 6
	var wg sync.WaitGroup
	results := make(chan providers.ScaleOutResult, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- p.ScaleOut(context.Background(), &messages.ScaleOutRequest{RequestId: fmt.Sprintf("so-%d", i), Settings: tenantA})
		}()
	}
	wg.Wait()
	close(results)
	var ids []string
	var refused int
	for out := range results {
		switch {
		case out.Result.GetOk():
			ids = append(ids, out.InstanceIDs...)
		case out.Result.GetReason() == providers.ReasonMaxRuntimeInstancesReached:
			refused++
		default:
			t.Fatalf("unexpected result %v", out.Result)
		}
	}
	slices.Sort(ids)
	want := []string{"tenant-a-runtime-1", "tenant-a-runtime-2", "tenant-a-runtime-3"}
	if !slices.Equal(ids, want) || refused != callers-3 {
		t.Fatalf("created %v, refused %d; want %v and %d", ids, refused, want, callers-3)
	}
}

func TestProvider_ScaleOut_thenDispatch(t *testing.T) {
	system := newSystem(t)
	dir := newDirectory()
	reg := &registry{}
	h := &host{t: t, system: system, dir: dir, reg: reg}
	t.Cleanup(h.wg.Wait)
	pr := providers.NewRegistry()
	if err := pr.Register(New(Config{System: system, Directory: dir, Host: h, Instances: reg.Instances})); err != nil {
		t.Fatalf("Register() = %v", err)
	}
	out := pr.ScaleOut(context.Background(), &messages.ScaleOutRequest{RequestId: "so-1", Settings: tenantB}, "")
	if !out.Result.GetOk() {
		t.Fatalf("ScaleOut() = %v", out.Result)
	}
	for deadline := time.Now().Add(2 * time.Second); !slices.Contains(reg.ids(), "tenant-b-runtime-1"); {
		if time.Now().After(deadline) {
			t.Fatal("instance not registered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	list, err := reg.Instances(context.Background())
	if err != nil {
		t.Fatalf("Instances() = %v", err)
	}
	res := pr.Dispatch(context.Background(), list[0], &messages.DispatchRequest{SharedRunId: "sr-1",
		Snapshot: &messages.ExecutionContextSnapshot{TenantId: "tenant-b"}})
	if !res.GetOk() || res.GetRuntimeInstanceId() != "tenant-b-runtime-1" || res.GetTenantId() != "tenant-b" {
		t.Fatalf("Dispatch() = %v", res)
	}
}

func TestProvider_ScaleOut_canceledWhileWaitingForScope(t *testing.T) {
	system := newSystem(t)
	reg := &registry{}
	p := New(Config{System: system, Directory: newDirectory(), Host: &host{t: t, system: system, dir: newDirectory(), reg: reg}, Instances: reg.Instances})
	release, ok := p.lockScope(context.Background(), "tenant-a-runtime")
	if !ok {
		t.Fatal("lockScope failed")
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	out := p.ScaleOut(ctx, &messages.ScaleOutRequest{Settings: tenantA})
	if out.Result.GetReason() != providers.ReasonCanceled || !out.Result.GetRetryable() {
		t.Fatalf("ScaleOut() = %v", out.Result)
	}
}
