package messages

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func sampleDeliveries(n int) []*AgentDelivery {
	snap := &ExecutionContextSnapshot{TenantId: "acme", CorrelationId: "c-1", Roles: []string{"a", "b"}}
	other := &ExecutionContextSnapshot{TenantId: "globex"}
	var ds []*AgentDelivery
	for i := range n {
		e := &MessageEnvelope{Id: fmt.Sprint("m", i), Recipient: &AgentId{Type: "echo", Key: fmt.Sprint("k", i)},
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), ContentType: "application/json", Snapshot: snap, Deadline: int64(1e18 + i)}
		switch i % 5 {
		case 1:
			e.Snapshot = other
		case 2:
			e.Sender, e.Topic = &AgentId{Type: "t", Key: "s"}, &TopicId{Type: "orders", Source: "x"}
		case 3:
			e.Payload, e.ContentType, e.Id = nil, "", ""
		case 4:
			e.Recipient.Key = "ключ ✓"
		}
		ds = append(ds, &AgentDelivery{Session: uint64(i) + 1<<40, Envelope: e})
	}
	return append(ds, &AgentDelivery{Session: 7}, &AgentDelivery{}) // no envelope; all zero
}

func sampleResults(n int) []*AgentDeliveryResult {
	var rs []*AgentDeliveryResult
	for i := range n {
		o := &DeliveryOutcome{Status: DeliveryOutcome_Status(i % 5), Response: []byte(fmt.Sprint(i)), ContentType: "application/json",
			Reason: fmt.Sprint("r", i%2), WorkerId: fmt.Sprint("w", i%3)}
		rs = append(rs, &AgentDeliveryResult{Session: uint64(i), Outcome: o})
	}
	return append(rs, &AgentDeliveryResult{Session: 9})
}

// checkUnpacked fails t unless unpacking b gives what proto.Unmarshal makes of it into m (the
// same error or none, the same elements; wrap puts elements in a message like m).
func checkUnpacked[T proto.Message](t *testing.T, b []byte, unpack func([]byte) ([]T, error), m proto.Message,
	list func() []T, wrap func([]T) proto.Message) {
	t.Helper()
	wantErr := proto.Unmarshal(b, m)
	got, err := unpack(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, proto.Unmarshal's %v", err, wantErr)
	}
	if err == nil && !proto.Equal(wrap(got), wrap(list())) {
		t.Fatalf("got %v, want %v", got, list())
	}
}

func checkDeliveries(t *testing.T, b []byte) {
	var m AgentSendRequest
	checkUnpacked(t, b, UnpackDeliveries, &m, func() []*AgentDelivery { return m.Deliveries },
		func(ds []*AgentDelivery) proto.Message { return &AgentSendRequest{Deliveries: ds} })
}

func checkResults(t *testing.T, b []byte) {
	var m AgentSendResponse
	checkUnpacked(t, b, UnpackResults, &m, func() []*AgentDeliveryResult { return m.Results },
		func(rs []*AgentDeliveryResult) proto.Message { return &AgentSendResponse{Results: rs} })
}

func TestUnpack_asProtoUnmarshal(t *testing.T) {
	for _, n := range []int{0, 1, 2, 17} {
		b, err := PackDeliveries(sampleDeliveries(n))
		if err != nil {
			t.Fatal(err)
		}
		checkDeliveries(t, b)
		if b, err = PackResults(sampleResults(n)); err != nil {
			t.Fatal(err)
		}
		checkResults(t, b)
	}
}

// TestUnpackDeliveries_leavesTheUnexpectedToProto: bytes the fast decoder does not expect are
// decoded (or refused) exactly as proto.Unmarshal does.
func TestUnpackDeliveries_leavesTheUnexpectedToProto(t *testing.T) {
	good, err := PackDeliveries(sampleDeliveries(3))
	if err != nil {
		t.Fatal(err)
	}
	unknown := protowire.AppendTag(append([]byte(nil), good...), 9, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 5)
	badUTF8 := mustPack(t, &AgentDelivery{Envelope: &MessageEnvelope{Recipient: &AgentId{Type: "echo"}}})
	badUTF8[len(badUTF8)-1] = 0xff // the last byte of the type name
	twice := append(append([]byte(nil), good...), good...)
	for name, b := range map[string][]byte{"an unknown field": unknown, "a string that is not UTF-8": badUTF8,
		"truncated": good[:len(good)-2], "requests concatenated": twice} {
		t.Run(name, func(t *testing.T) { checkDeliveries(t, b) })
	}
}

func mustPack(t *testing.T, ds ...*AgentDelivery) []byte {
	t.Helper()
	b, err := PackDeliveries(ds)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnpackDeliveries_fewAllocationsPerRequest(t *testing.T) {
	b, err := PackDeliveries(sampleDeliveries(100)[:100])
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := UnpackDeliveries(b); err != nil {
			t.Fatal(err)
		}
	})
	// Four arrays, two snapshots (each with its strings and roles) and the senders and topics
	// of a fifth of the deliveries; proto.Unmarshal makes about 900 for these 100.
	if allocs > 60 {
		t.Fatalf("%.0f allocations to unpack 100 deliveries", allocs)
	}
}

func FuzzUnpackDeliveries(f *testing.F) {
	for _, n := range []int{0, 1, 6} {
		b, err := PackDeliveries(sampleDeliveries(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(checkDeliveries)
}

func FuzzUnpackResults(f *testing.F) {
	b, err := PackResults(sampleResults(4))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(checkResults)
}
