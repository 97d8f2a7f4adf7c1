package actors

import (
	"strconv"
	"testing"

	"github.com/dairuntime/dair/messages"
)

func TestAgentRuntime_assignIDs_uniqueInSequenceKeepsGiven(t *testing.T) {
	rt := &agentRuntime{selfID: "w1"}
	envs := make([]*messages.MessageEnvelope, 40)
	for i := range envs {
		envs[i] = &messages.MessageEnvelope{}
		if i%7 == 3 {
			envs[i].Id = "given-" + strconv.Itoa(i)
		}
	}
	before := rt.messageID()
	rt.assignIDs(envs)
	seq := uint64(1) // messageID took 1
	for i, e := range envs {
		if i%7 == 3 {
			if e.Id != "given-"+strconv.Itoa(i) {
				t.Fatalf("envelope %d: given id replaced by %q", i, e.Id)
			}
			continue
		}
		seq++
		if want := "msg-w1-" + strconv.FormatUint(seq, 36); e.Id != want {
			t.Fatalf("envelope %d: id %q, want %q (after %q)", i, e.Id, want, before)
		}
	}
	if next, want := rt.messageID(), "msg-w1-"+strconv.FormatUint(seq+1, 36); next != want {
		t.Fatalf("next id %q, want %q", next, want)
	}
}
