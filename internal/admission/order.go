package admission

import (
	"cmp"
	"slices"
	"strings"

	"github.com/dairuntime/dair/messages"
)

// Order sorts insts in place by seed 000's recommended ordering: effective available run slots
// descending (reserved holds the live reservation count per instance id; nil means none),
// available workers descending, running runs ascending, queued runs ascending, last heartbeat
// descending, then runtime instance id ascending byte-wise. Nil entries sort last. The sort is
// deterministic for any input order when instance ids are unique.
func Order(insts []*messages.CapacityDescriptor, reserved map[string]int) {
	slices.SortStableFunc(insts, func(a, b *messages.CapacityDescriptor) int {
		return compare(a, b, reserved)
	})
}

func compare(a, b *messages.CapacityDescriptor, reserved map[string]int) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	if c := cmp.Compare(EffectiveAvailableRunSlots(b, reserved[b.RuntimeInstanceId]),
		EffectiveAvailableRunSlots(a, reserved[a.RuntimeInstanceId])); c != 0 {
		return c
	}
	if c := cmp.Compare(b.AvailableWorkerCount, a.AvailableWorkerCount); c != 0 {
		return c
	}
	if c := cmp.Compare(a.RunningRunCount, b.RunningRunCount); c != 0 {
		return c
	}
	if c := cmp.Compare(a.QueuedRunCount, b.QueuedRunCount); c != 0 {
		return c
	}
	if c := cmp.Compare(b.LastHeartbeatAt, a.LastHeartbeatAt); c != 0 {
		return c
	}
	return strings.Compare(a.RuntimeInstanceId, b.RuntimeInstanceId)
}
