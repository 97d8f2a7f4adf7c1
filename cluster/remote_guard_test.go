package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
)

func TestCheckBatch(t *testing.T) {
	ping, err := proto.Marshal(&messages.Ping{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	pid := actor.NewPID("127.0.0.1:1", "x")
	good := func() *remote.MessageBatch {
		return &remote.MessageBatch{TypeNames: []string{"dair.v1.Ping"}, Targets: []*actor.PID{pid}, Senders: []*actor.PID{pid},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: ping, Target: 0, Sender: 1}}}
	}
	tests := []struct {
		name   string
		mutate func(b *remote.MessageBatch)
		ok     bool
	}{
		{"a batch of registered types with indices in range", func(*remote.MessageBatch) {}, true},
		{"no sender", func(b *remote.MessageBatch) { b.Envelopes[0].Sender = 0 }, true},
		{"a type this binary does not register", func(b *remote.MessageBatch) { b.TypeNames[0] = "other.v9.Unknown" }, false},
		{"the JSON serializer", func(b *remote.MessageBatch) { b.Envelopes[0].SerializerId = 1 }, false},
		{"a type index past the table", func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = 1 }, false},
		{"a negative type index", func(b *remote.MessageBatch) { b.Envelopes[0].TypeId = -1 }, false},
		{"a target index past the table", func(b *remote.MessageBatch) { b.Envelopes[0].Target = 1 }, false},
		{"a nil target", func(b *remote.MessageBatch) { b.Targets[0] = nil }, false},
		{"a sender index past the table", func(b *remote.MessageBatch) { b.Envelopes[0].Sender = 2 }, false},
		{"a nil sender", func(b *remote.MessageBatch) { b.Senders[0] = nil }, false},
		{"an empty envelope", func(b *remote.MessageBatch) { b.Envelopes = append(b.Envelopes, nil) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := good()
			tt.mutate(b)
			err := checkBatch(b)
			if tt.ok != (err == nil) {
				t.Fatalf("checkBatch = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, errBadRemoteMessage) {
				t.Fatalf("checkBatch = %v, want errBadRemoteMessage", err)
			}
		})
	}
}

// TestMembership_Remote_badMessagesEndTheirStreamNotTheNode: without the guard each of these
// panics on a gRPC goroutine of protoactor's endpoint reader and the test binary dies.
func TestMembership_Remote_badMessagesEndTheirStreamNotTheNode(t *testing.T) {
	n := startNodeCfg(t, Config{NodeID: "guarded"}, false)
	got := make(chan *messages.Ping, 1)
	if _, err := n.sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if p, ok := c.Message().(*messages.Ping); ok {
			got <- p
		}
	}), "sink"); err != nil {
		t.Fatal(err)
	}
	target := actor.NewPID(n.m.Self().Address, "sink")
	conn, err := grpc.NewClient(n.m.Self().Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Error(err)
		}
	})
	client := remote.NewRemotingClient(conn)
	ping, err := proto.Marshal(&messages.Ping{Seq: 7})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(typeName string, typeID int32) *remote.RemoteMessage {
		return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
			TypeNames: []string{typeName}, Targets: []*actor.PID{target},
			Envelopes: []*remote.MessageEnvelope{{TypeId: typeID, MessageData: ping}}}}}
	}
	// send opens a stream, connects as a server connection would, sends msg, and returns
	// the stream's end (nil while it stays open for a moment).
	send := func(msg *remote.RemoteMessage) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := client.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "test-client", Address: "127.0.0.1:1"}}}}}); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Recv(); err != nil || r.GetConnectResponse() == nil {
			t.Fatalf("connect: %v %v", r, err)
		}
		if err := s.Send(msg); err != nil {
			t.Fatal(err)
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		return err
	}
	for name, msg := range map[string]*remote.RemoteMessage{
		"unknown type":      batch("other.v9.Unknown", 0),
		"type out of range": batch("dair.v1.Ping", 3),
	} {
		if err := send(msg); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: stream ended with %v, want InvalidArgument", name, err)
		}
	}
	if _, err := client.ListProcesses(context.Background(), &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := client.GetProcessDiagnostics(context.Background(), &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
	// The node still takes good traffic.
	if err := send(batch("dair.v1.Ping", 0)); err != nil && status.Code(err) == codes.InvalidArgument {
		t.Fatalf("a good batch was refused: %v", err)
	}
	select {
	case p := <-got:
		if p.Seq != 7 {
			t.Fatalf("sink got %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the good batch was not delivered after the refused ones")
	}
}
