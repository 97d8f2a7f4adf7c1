package messages

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// marshalled is proto.Marshal's encoding of m (deterministic).
func marshalled(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPack_asProtoMarshal: the hand-written packed forms are byte for byte proto.Marshal's
// encoding of the request or response holding only the elements.
func TestPack_asProtoMarshal(t *testing.T) {
	for _, n := range []int{0, 1, 2, 17} {
		ds := sampleDeliveries(n)
		got, err := PackDeliveries(ds)
		if err != nil {
			t.Fatal(err)
		}
		if want := marshalled(t, &AgentSendRequest{Deliveries: ds}); !bytes.Equal(got, want) {
			t.Fatalf("%d deliveries packed as\n%x\nproto.Marshal:\n%x", n, got, want)
		}
		rs := sampleResults(n)
		if got, err = PackResults(rs); err != nil {
			t.Fatal(err)
		}
		if want := marshalled(t, &AgentSendResponse{Results: rs}); !bytes.Equal(got, want) {
			t.Fatalf("%d results packed as\n%x\nproto.Marshal:\n%x", n, got, want)
		}
	}
}

// populate sets every field of m, and of the messages in it, to a value that is not zero
// (repeated fields get two elements, one of them empty), so that a field added to the messages
// and not to the hand encoder fails TestPack_everyField.
func populate(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					populate(e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(scalar(fd, k))
				}
			}
		case fd.Kind() == protoreflect.MessageKind && depth < 4:
			populate(m.Mutable(fd).Message(), depth+1)
		case fd.Kind() != protoreflect.MessageKind:
			m.Set(fd, scalar(fd, 1))
		}
	}
}

// scalar returns a value of fd's kind: k = 0 its zero value for strings and bytes (an empty
// element of a repeated field), otherwise one that is not zero.
func scalar(fd protoreflect.FieldDescriptor, k int) protoreflect.Value {
	s := fmt.Sprintf("f%d-é-%d", fd.Number(), k)
	if k == 0 {
		s = ""
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(s))
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(-1 << 40)
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(1 << 50)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(-3)
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	}
	panic(fmt.Sprintf("populate: no value for %v", fd.Kind()))
}

func TestPack_everyField(t *testing.T) {
	d := &AgentDelivery{}
	populate(d.ProtoReflect(), 0)
	got, err := AppendDelivery(nil, d.Session, d.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	if want := marshalled(t, &AgentSendRequest{Deliveries: []*AgentDelivery{d}}); !bytes.Equal(got, want) {
		t.Fatalf("delivery with every field set packed as\n%x\nproto.Marshal:\n%x", got, want)
	}
	r := &AgentDeliveryResult{}
	populate(r.ProtoReflect(), 0)
	if got, err = AppendResult(nil, r.Session, r.Outcome); err != nil {
		t.Fatal(err)
	}
	if want := marshalled(t, &AgentSendResponse{Results: []*AgentDeliveryResult{r}}); !bytes.Equal(got, want) {
		t.Fatalf("result with every field set packed as\n%x\nproto.Marshal:\n%x", got, want)
	}
	negative := &DeliveryOutcome{Status: -2} // an enum value is sign-extended
	if got, err = AppendResult(nil, 1, negative); err != nil {
		t.Fatal(err)
	}
	if want := marshalled(t, &AgentSendResponse{Results: []*AgentDeliveryResult{{Session: 1, Outcome: negative}}}); !bytes.Equal(got, want) {
		t.Fatalf("negative status packed as %x, proto.Marshal: %x", got, want)
	}
}

// TestPack_leavesTheUncoveredToProto: unknown fields are kept and strings that are not UTF-8
// refused, as proto.Marshal does; a refused element leaves the buffer as it was.
func TestPack_leavesTheUncoveredToProto(t *testing.T) {
	withUnknown := func() *MessageEnvelope {
		e := &MessageEnvelope{Id: "m", Recipient: &AgentId{Type: "echo", Key: "k"}, Snapshot: &ExecutionContextSnapshot{TenantId: "acme"}}
		e.Snapshot.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
		return e
	}
	prefix := []byte{0x12, 0x00} // an earlier element
	got, err := AppendDelivery(prefix, 5, withUnknown())
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0x12, 0x00}, marshalled(t, &AgentSendRequest{Deliveries: []*AgentDelivery{{Session: 5, Envelope: withUnknown()}}})...)
	if !bytes.Equal(got, want) {
		t.Fatalf("envelope with unknown fields packed as\n%x\nwant\n%x", got, want)
	}
	bad := []*MessageEnvelope{
		{Id: "\xff"}, {ContentType: "\xc3"}, {Recipient: &AgentId{Key: "k\xff"}}, {Sender: &AgentId{Type: "\xff"}},
		{Topic: &TopicId{Source: "\xff"}}, {Snapshot: &ExecutionContextSnapshot{TenantId: "a\xffb"}},
		{Snapshot: &ExecutionContextSnapshot{Roles: []string{"ok", "\xff"}}},
	}
	for _, e := range bad {
		if _, perr := proto.Marshal(e); perr == nil {
			t.Fatalf("proto.Marshal took %v", e)
		}
		out, err := AppendDelivery(prefix, 1, e)
		if err == nil || !bytes.Equal(out, prefix) {
			t.Errorf("AppendDelivery(%v) = %x, %v; want the prefix and an error", e, out, err)
		}
	}
	out, err := AppendResult(prefix, 1, &DeliveryOutcome{Reason: "\xff"})
	if err == nil || !bytes.Equal(out, prefix) {
		t.Errorf("AppendResult of a reason that is not UTF-8 = %x, %v; want the prefix and an error", out, err)
	}
}

func TestAppendDelivery_noAllocation(t *testing.T) {
	d := sampleDeliveries(1)[0]
	o := &DeliveryOutcome{Status: DeliveryOutcome_DELIVERED, Response: d.Envelope.Payload}
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = AppendDelivery(buf[:0], d.Session, d.Envelope); err != nil {
			t.Fatal(err)
		}
		if buf, err = AppendResult(buf[:0], 3, o); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%.0f allocations to append a delivery and a result to a buffer with room", allocs)
	}
}
