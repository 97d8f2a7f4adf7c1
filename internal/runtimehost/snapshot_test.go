package runtimehost_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/testkit"
)

const capturePipeline = `key: cap
steps:
  - id: one
    uses: capture
`

// TestTransport_snapshotArrivesUnchanged: for each remote transport, a run submitted with a
// full ExecutionContextSnapshot is admitted, dispatched by the pump through the registry to
// the instance's provider (the instance registered provider_name = the transport), carried
// over a real socket or Redis stream, and its step handler receives a snapshot proto.Equal to
// the submitted one.
func TestTransport_snapshotArrivesUnchanged(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	for _, transport := range remoteTransports {
		t.Run(transport, func(t *testing.T) {
			rg := startRig(t, r, transport, actors.Config{}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := rg.node.PutPipeline(ctx, []byte(capturePipeline))
			require.NoError(t, err)
			snap := &messages.ExecutionContextSnapshot{TenantId: "acme", TenantGroupId: "enterprise", OrgId: "org-7", UserId: "u-42",
				CorrelationId: "corr-1", RequestedBy: "alice", Source: "transport-test", Roles: []string{"tenant", "operator"}}
			run, err := rg.node.Submit(ctx, actors.SubmitRequest{Pipeline: "cap", Snapshot: proto.Clone(snap).(*messages.ExecutionContextSnapshot)})
			require.NoError(t, err)
			done, err := rg.node.Await(ctx, run.SharedRunId)
			require.NoError(t, err)
			require.Equal(t, messages.RunSucceeded, done.Status, done.FailureReason)
			require.Equal(t, rg.instance, done.AssignedRuntimeInstanceId)
			calls := rg.capture.calls()
			require.Len(t, calls, 1)
			require.True(t, proto.Equal(snap, calls[0].Snapshot), "snapshot at the handler %v, submitted %v", calls[0].Snapshot, snap)
			// The dispatch entry records the provider's answer, which can come after a run this
			// short has ended on the host (the host's entries and the control plane's are
			// written by different nodes): wait for it.
			var provider string
			require.NoError(t, testkit.WaitFor(ctx, 5*time.Millisecond, func() (bool, error) {
				_, entries, err := rg.node.Ledger(ctx, run.SharedRunId, 0)
				for _, e := range entries {
					if e.Kind == messages.KindDispatch {
						provider = string(e.Data)
					}
				}
				return provider != "", err
			}), "no dispatch entry in the run's ledger")
			require.Contains(t, provider, `"provider":"`+transport+`"`, "dispatched through the %s provider", transport)
		})
	}
}
