package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// protoactor's remote service at the pinned version, as its generated code names it.
const (
	remoteReceiveMethod = "/remote.Remoting/Receive"
	// protoSerializerID is the index of protoactor's protobuf serializer (the only one dair
	// sends with; index 1 is its JSON serializer).
	protoSerializerID = 0
)

// errBadRemoteMessage is what a guarded stream's RecvMsg returns for a message batch the
// endpoint reader would crash on; the stream ends with it and the node stays up.
var errBadRemoteMessage = errors.New("cluster: remote message refused")

// guardOptions are the gRPC server options that keep a malformed or foreign message on the
// actor port from killing the node. At the pinned version protoactor's endpoint reader
// dereferences the result of a message type lookup without a check (a type name this binary
// does not register panics on a gRPC goroutine, which no one recovers), indexes the batch's
// type, target and sender tables with the envelope's numbers unchecked, and answers the
// service's two unary methods with panic("implement me"). A peer of another build, a stale
// member whose port a new node reuses, or a scanner on the port reached any of them. The
// guard checks every batch before the reader sees it (a bad one ends that stream: the sender
// reconnects, nothing else is affected), refuses the unary methods, and recovers whatever
// panic is left in a handler. log receives one line per refusal. The server also takes
// messages of up to maxRemoteMessage (gRPC's 4 MiB default broke streams under load).
func guardOptions(log *zap.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRemoteMessage),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
			defer recoverHandler(log, info.FullMethod, &err)
			if info.FullMethod == remoteReceiveMethod {
				ss = &guardedStream{ServerStream: ss, log: log}
			}
			return handler(srv, ss)
		}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
			// Both unary methods of the remote service panic at this version; dair uses neither.
			log.Warn("refused a call of an unimplemented remote method", zap.String("method", info.FullMethod))
			return nil, status.Errorf(codes.Unimplemented, "cluster: %s is not served", info.FullMethod)
		}),
	}
}

// recoverHandler turns a panic of a stream handler into its error.
func recoverHandler(log *zap.Logger, method string, err *error) {
	if r := recover(); r != nil {
		log.Error("remote handler panicked; stream closed", zap.String("method", method), zap.Any("panic", r),
			zap.ByteString("stack", debug.Stack()))
		*err = status.Errorf(codes.Internal, "cluster: %s: handler failed", method)
	}
}

// guardedStream checks each message of protoactor's Receive stream before the endpoint reader
// gets it.
type guardedStream struct {
	grpc.ServerStream
	log *zap.Logger
}

// RecvMsg receives the next message and refuses a batch that checkBatch rejects.
func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := checkBatch(b); err != nil {
			s.log.Warn("refused a remote message batch", zap.Error(err))
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return nil
}

// checkBatch reports why the endpoint reader could not handle b safely: an envelope whose
// serializer is not the protobuf one, whose type is not registered in this binary, or whose
// type, target or sender index is outside the batch's tables. It is pure.
func checkBatch(b *remote.MessageBatch) error {
	for i, typeName := range b.TypeNames {
		if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName)); err != nil {
			return fmt.Errorf("%w: type %d %q is not registered here", errBadRemoteMessage, i, typeName)
		}
	}
	for i, e := range b.Envelopes {
		switch {
		case e == nil:
			return fmt.Errorf("%w: envelope %d is empty", errBadRemoteMessage, i)
		case e.SerializerId != protoSerializerID:
			return fmt.Errorf("%w: envelope %d uses serializer %d", errBadRemoteMessage, i, e.SerializerId)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("%w: envelope %d names type %d of %d", errBadRemoteMessage, i, e.TypeId, len(b.TypeNames))
		case e.Target < 0 || int(e.Target) >= len(b.Targets) || b.Targets[e.Target] == nil:
			return fmt.Errorf("%w: envelope %d names target %d of %d", errBadRemoteMessage, i, e.Target, len(b.Targets))
		case e.Sender < 0 || int(e.Sender) > len(b.Senders) || (e.Sender > 0 && b.Senders[e.Sender-1] == nil):
			return fmt.Errorf("%w: envelope %d names sender %d of %d", errBadRemoteMessage, i, e.Sender, len(b.Senders))
		}
	}
	return nil
}
