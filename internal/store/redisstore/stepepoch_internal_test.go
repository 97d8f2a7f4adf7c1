package redisstore

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

// TestStepStateEpochField: the field commitArgs appends is StepState's epoch, and the appended
// value wins over the one encoded before it.
func TestStepStateEpochField(t *testing.T) {
	f := (&messages.StepState{}).ProtoReflect().Descriptor().Fields().ByName("epoch")
	if f == nil || int(f.Number()) != stepStateEpochField {
		t.Fatalf("StepState.epoch is field %v, commitArgs appends field %d", f, stepStateEpochField)
	}
	pb, err := proto.Marshal(&messages.StepState{StepId: "a", Epoch: 3, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	pb = protowire.AppendVarint(protowire.AppendTag(pb, stepStateEpochField, protowire.VarintType), 7)
	var got messages.StepState
	if err := proto.Unmarshal(pb, &got); err != nil || got.Epoch != 7 || got.StepId != "a" || got.Attempts != 2 {
		t.Fatalf("decoded %v, %v: want step a, attempts 2, epoch 7", &got, err)
	}
}
