package actors

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/messages"
)

// TestStartableHere: an execution starts only for a run its instance still holds.
func TestStartableHere(t *testing.T) {
	for _, tc := range []struct {
		name, status, assigned string
		ok                     bool
	}{
		{"dispatched here", messages.RunDispatched, "i1", true},
		{"running here (restart)", messages.RunRunning, "i1", true},
		{"paused here", messages.RunPaused, "i1", true},
		{"finished: nothing to change", messages.RunSucceeded, "i2", true},
		{"dispatched elsewhere", messages.RunDispatched, "i2", false},
		{"running elsewhere", messages.RunRunning, "i2", false},
		{"requeued", messages.RunQueued, "i1", false},
		{"parked for scale-out", messages.RunScaleOutRequested, "i1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startableHere(&messages.SharedRun{Status: tc.status, AssignedRuntimeInstanceId: tc.assigned}, "i1")
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errRunMoved)
			}
		})
	}
}
