package providers_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// echoProvider is a dispatch-only provider.
type echoProvider struct{}

func (echoProvider) Name() string { return "echo" }

func (echoProvider) Dispatch(_ context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	return providers.Success("echo", d.GetRuntimeInstanceId(), providers.OpDispatch)
}

func ExampleRegistry() {
	reg := providers.NewRegistry(providers.WithObserver(func(r *messages.ProviderResult, _ time.Duration) {
		fmt.Printf("observed %s/%s ok=%v reason=%q\n", r.GetProvider(), r.GetOp(), r.GetOk(), r.GetReason())
	}))
	if err := reg.Register(echoProvider{}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reg.Register(echoProvider{}))

	d := &messages.CapacityDescriptor{RuntimeInstanceId: "ri-1", Metadata: map[string]string{"provider.name": "echo"}}
	reg.Dispatch(context.Background(), d, &messages.DispatchRequest{SharedRunId: "sr-1"})
	reg.Control(context.Background(), d, &messages.ControlRequest{Op: "pause_queue"})
	reg.ScaleOut(context.Background(), &messages.ScaleOutRequest{RequestId: "so-1"}, "")
	// Output:
	// register provider: providers: duplicate provider: "echo"
	// observed echo/dispatch ok=true reason=""
	// observed echo/control ok=false reason="capability-not-supported"
	// observed local/scale-out ok=false reason="provider-not-found"
}
