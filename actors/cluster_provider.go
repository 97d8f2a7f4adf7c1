package actors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/local"
)

var _ providers.ScaleOuter = (*local.Provider)(nil)

// ActorProviderName is the provider that reaches runtime instances on any node of the cluster
// through their protoactor PIDs (address + actor id from the capacity descriptor).
const ActorProviderName = "actor"

// hostPIDID is the PID id of a node's runtime host actor.
func hostPIDID(nodeID string) string { return "node-" + nodeID + "/host" }

// RemotePID resolves an instance's PID from its descriptor (its remote address and actor id);
// providers that reach instances on other processes use it as their resolver.
func RemotePID(d *messages.CapacityDescriptor) (*actor.PID, bool) {
	if d.GetAddress() == "" || d.GetActorId() == "" {
		return nil, false
	}
	return actor.NewPID(d.Address, d.ActorId), true
}

// InstanceIDInUse returns the scale-out providers' local.Config.InUse over st: an instance id
// absent from the registry is still in use while executions are indexed under it (not yet
// recovered) or reservations are held against it. Reusing it then would let a recovery of the
// departed instance fence, and requeue, the runs of the new one.
func InstanceIDInUse(st store.Store) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		// Reservations first: one cheap count, and a departed instance's holds outlive its
		// executions' recovery (they are released one run at a time).
		if n, err := st.ReservationCount(ctx, id); err != nil || n > 0 {
			return n > 0, err
		}
		execs, err := st.ListExecutionsByInstance(ctx, id)
		return len(execs) > 0, err
	}
}

// newActorProvider returns the cluster's "actor" provider: the local provider's behaviour with
// a remote resolver and a host that places new instances on the least-loaded runtime member.
func newActorProvider(e *env, m *cluster.Membership) *local.Provider {
	return local.New(local.Config{Name: ActorProviderName, System: e.system, Resolver: RemotePID,
		Host: &clusterHost{env: e, members: m}, Instances: e.st.ListInstances, InUse: InstanceIDInUse(e.st), ReadyTimeout: 15 * time.Second})
}

// clusterHost creates runtime instances on a runtime member of the cluster.
type clusterHost struct {
	env     *env
	members *cluster.Membership
}

// CreateInstance asks the runtime host of the least-loaded runtime member to start the
// instance, and waits until it is registered. A store lease on the instance id keeps two
// control planes from creating the same id on two nodes.
func (h *clusterHost) CreateInstance(ctx context.Context, id string, settings *messages.TenantSettings, requestID string) error {
	e := h.env
	holder := requestID
	if holder == "" {
		holder = e.incarnation
	}
	lease := "create-instance/" + id
	ok, err := e.st.AcquireLease(ctx, lease, holder, time.Minute)
	if err != nil {
		return fmt.Errorf("lease instance id %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("instance id %s is being created by another control plane", id)
	}
	// The lease covers the window until the instance is in the registry (from then on every
	// control plane sees the id as taken); it is released then, or on failure.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := e.st.ReleaseLease(rctx, lease, holder); err != nil {
			e.log.Warn("release instance id lease", zap.String("lease", lease), zap.Error(err))
		}
	}()
	// Another control plane may have created and registered the id between our registry read
	// and our lease: under the lease, the registry is the truth.
	if _, err := e.st.GetInstance(ctx, id); err == nil {
		return fmt.Errorf("instance id %s already exists", id)
	}
	target, err := h.target(ctx)
	if err != nil {
		return err
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	pid := actor.NewPID(target.Address, hostPIDID(target.NodeID))
	res, err := e.system.Root.RequestFuture(pid, &messages.CreateInstanceRequest{RuntimeInstanceId: id, Settings: settings,
		ScaleOutRequestId: requestID}, timeout).Result()
	if err != nil {
		return fmt.Errorf("create instance %s on %s: %w", id, target.NodeID, err)
	}
	if r, ok := res.(*messages.ProviderResult); !ok || !r.Ok {
		return fmt.Errorf("create instance %s on %s: %v", id, target.NodeID, res)
	}
	e.log.Info("instance placed", zap.String("runtime_instance_id", id), zap.String("node", target.NodeID), zap.String("member", target.ID))
	return h.waitRegistered(ctx, id)
}

// target picks the runtime member hosting the fewest live instances (ties by id), skipping
// the members this node declared lost and those whose remote endpoint refuses connections: a
// lost member stays in memberlist's view until its failure detector fires (a paused one
// would take the request and never answer, and hosts no instance any more, so it would look
// the least loaded).
func (h *clusterHost) target(ctx context.Context) (cluster.Member, error) {
	insts, err := h.env.st.ListInstances(ctx)
	if err != nil {
		return cluster.Member{}, fmt.Errorf("list instances: %w", err)
	}
	load := map[string]int{}
	for _, d := range insts {
		load[d.NodeId]++
	}
	var cands []cluster.Member
	for _, m := range h.members.Members() {
		if _, lost := h.env.lost.Load(m.ID); m.HasRole(RoleRuntime) && !lost {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return cluster.Member{}, fmt.Errorf("no runtime member in the cluster")
	}
	sort.Slice(cands, func(i, j int) bool {
		if load[cands[i].ID] != load[cands[j].ID] {
			return load[cands[i].ID] < load[cands[j].ID]
		}
		return cands[i].ID < cands[j].ID
	})
	for _, m := range cands {
		if !endpointRefuses(m.Address) {
			return m, nil
		}
	}
	return cands[0], nil
}

// waitRegistered waits up to 10s for instance id to appear in the registry.
func (h *clusterHost) waitRegistered(ctx context.Context, id string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err := h.env.st.GetInstance(ctx, id); err == nil {
			return nil
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// crashProbeTimeout bounds the connection attempt that tells a crashed member from a slow one.
const crashProbeTimeout = 250 * time.Millisecond

// endpointRefuses reports whether a TCP connection to addr is refused: no process listens
// there any more. A timeout or a success (a paused, partitioned or live process) is false.
func endpointRefuses(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, crashProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
