package store

import (
	"hash/fnv"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// DescriptorShape returns the registry version of a capacity descriptor that
// Assigner.ListInstanceVersions reports and Assigner.Assign checks: a fingerprint of what a
// dispatch decision assumes of the instance and what does not move with its load (status,
// pause and drain, slot count, tenancy, roles, address). The load fields (run and worker
// counts, free slots, can_accept_run, last heartbeat) are left out: the slot hold that Assign
// takes enforces capacity on its own, and leaving them out keeps a heartbeat, or a run started
// or finished, from refusing every decision taken on the view before it. It is never 0
// (Assignment.InstanceVersion 0 skips the check).
func DescriptorShape(d *messages.CapacityDescriptor) int64 {
	c := proto.Clone(d).(*messages.CapacityDescriptor)
	c.ActiveWorkerCount, c.AvailableWorkerCount, c.AvailableRunSlots = 0, 0, 0
	c.QueuedRunCount, c.RunningRunCount, c.ActiveRunCount = 0, 0, 0
	c.CanAcceptRun, c.LastHeartbeatAt = false, 0
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return 1 // a descriptor that does not marshal is never stored either
	}
	h := fnv.New64a()
	h.Write(b) // a hash.Hash never returns an error
	if v := int64(h.Sum64() >> 1); v != 0 {
		return v
	}
	return 1
}
