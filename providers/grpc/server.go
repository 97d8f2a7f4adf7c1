package grpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/remote"
)

// Invoker runs one invocation of seed 001's RuntimeService: it submits the run of req (whose
// snapshot the server has checked against the tenant metadata) and calls send with each of
// the run's events in order until the terminal one. It blocks for the run's lifetime or until
// ctx ends, and is goroutine-safe. An error is answered with a gRPC status: use status.Error
// for a specific code.
type Invoker interface {
	Invoke(ctx context.Context, req *messages.InvokeRequest, send func(*messages.InvokeEvent) error) error
}

// ServerConfig configures NewServer.
type ServerConfig struct {
	// Backend reaches the host's runtime instances. Required.
	Backend remote.Backend
	// Instances lists the instances this host serves. Required.
	Instances remote.Instances
	// Invoker serves RuntimeService.Invoke. Nil: Invoke answers UNIMPLEMENTED.
	Invoker Invoker
	// TLS, when set, is the server's TLS configuration (set ClientAuth and ClientCAs for
	// mutual TLS). Nil: plaintext, meant for loopback.
	TLS *tls.Config
}

// NewServer returns a gRPC server with RuntimeInstanceService and RuntimeService registered.
// Serve it on a listener; stop it with GracefulStop or Stop.
func NewServer(cfg ServerConfig) *grpc.Server {
	var opts []grpc.ServerOption
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	opts = append(opts, grpc.ForceServerCodec(checkedCodec{}))
	s := grpc.NewServer(opts...)
	s.RegisterService(badRequestsInvalid(&messages.RuntimeInstanceService_ServiceDesc),
		&instanceService{backend: cfg.Backend, instances: cfg.Instances})
	s.RegisterService(badRequestsInvalid(&messages.RuntimeService_ServiceDesc), &runtimeService{invoker: cfg.Invoker})
	return s
}

// badRequestsInvalid returns a copy of desc whose methods answer a request message that does
// not decode with INVALID_ARGUMENT. grpc-go answers INTERNAL, and writes that status itself
// before the handler returns, which tells a caller the server failed (and to retry) when it
// was the caller's bytes. So the server's codec (checkedCodec) does not fail a decode: it
// notes the message as undecodable, and the decoders the handlers are given here answer it.
func badRequestsInvalid(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *desc
	out.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return decoded(v, dec(v)) }, in)
		}
		out.Methods[i] = m
	}
	out.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, sd := range desc.Streams {
		h := sd.Handler
		sd.Handler = func(srv any, stream grpc.ServerStream) error { return h(srv, decodeChecked{stream}) }
		out.Streams[i] = sd
	}
	return &out
}

// decodeChecked is a server stream whose received messages that did not decode are
// INVALID_ARGUMENT (see badRequestsInvalid).
type decodeChecked struct{ grpc.ServerStream }

func (s decodeChecked) RecvMsg(m any) error { return decoded(m, s.ServerStream.RecvMsg(m)) }

// undecodable holds the decode error of each message checkedCodec could not decode, until the
// handler's decoder takes it (decoded).
var undecodable sync.Map // proto.Message -> error

// decoded returns the error of receiving v: err, or INVALID_ARGUMENT when checkedCodec noted v
// as undecodable.
func decoded(v any, err error) error {
	if bad, ok := undecodable.LoadAndDelete(v); ok {
		return status.Errorf(codes.InvalidArgument, "the request message does not decode: %v", bad)
	}
	return err
}

// checkedCodec is the server's protobuf codec: a message that does not decode is noted in
// undecodable, not failed (see badRequestsInvalid).
type checkedCodec struct{}

func (checkedCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("grpc: cannot marshal %T: not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (checkedCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("grpc: cannot unmarshal into %T: not a protobuf message", v)
	}
	if err := proto.Unmarshal(data, m); err != nil {
		undecodable.Store(v, err)
	}
	return nil
}

func (checkedCodec) Name() string { return "proto" }

// instanceService implements RuntimeInstanceService over a Backend.
type instanceService struct {
	messages.UnimplementedRuntimeInstanceServiceServer
	backend   remote.Backend
	instances remote.Instances
}

func (s *instanceService) exec(ctx context.Context, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, error) {
	id := remote.CommandInstance(cmd)
	if !slices.Contains(s.instances(), id) {
		return nil, status.Errorf(codes.NotFound, "runtime instance %q is not served here", id)
	}
	cmd.RuntimeInstanceId = id
	return remote.Execute(ctx, s.backend, cmd, time.Now()), nil
}

// Dispatch delivers a run into the instance's local queue.
func (s *instanceService) Dispatch(ctx context.Context, m *messages.DispatchRequest) (*messages.ProviderResult, error) {
	res, err := s.exec(ctx, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Dispatch{Dispatch: m}})
	return res.GetResult(), err
}

// QueueStatus answers the instance's queue state and capacity descriptor.
func (s *instanceService) QueueStatus(ctx context.Context, m *messages.QueueStatusRequest) (*messages.QueueStatus, error) {
	res, err := s.exec(ctx, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Status{Status: m}})
	return res.GetStatus(), err
}

// RunStatus answers a local run's status.
func (s *instanceService) RunStatus(ctx context.Context, m *messages.RunStatusRequest) (*messages.RunStatus, error) {
	res, err := s.exec(ctx, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_RunStatus{RunStatus: m}})
	return res.GetRunStatus(), err
}

// Control applies a control op.
func (s *instanceService) Control(ctx context.Context, m *messages.ControlRequest) (*messages.ProviderResult, error) {
	res, err := s.exec(ctx, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Control{Control: m}})
	return res.GetResult(), err
}

// Heartbeat answers the instance's current descriptor.
func (s *instanceService) Heartbeat(ctx context.Context, m *messages.HeartbeatRequest) (*messages.HeartbeatResponse, error) {
	res, err := s.exec(ctx, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Heartbeat{Heartbeat: m}})
	if err != nil {
		return nil, err
	}
	if !res.GetResult().GetOk() {
		return nil, status.Errorf(codes.Unavailable, "runtime instance %q: %s", m.GetRuntimeInstanceId(), res.GetResult().GetReason())
	}
	return res.GetHeartbeat(), nil
}

// ListInstances lists the host's instances.
func (s *instanceService) ListInstances(ctx context.Context, _ *messages.ListInstancesRequest) (*messages.ListInstancesResponse, error) {
	return remote.List(ctx, s.backend, s.instances()), nil
}

// runtimeService implements seed 001's RuntimeService.
type runtimeService struct {
	messages.UnimplementedRuntimeServiceServer
	invoker Invoker
}

// Invoke checks the tenant metadata against the request's snapshot and streams the invoked
// run's events.
func (s *runtimeService) Invoke(req *messages.InvokeRequest, stream grpc.ServerStreamingServer[messages.InvokeEvent]) error {
	if s.invoker == nil {
		return status.Error(codes.Unimplemented, "this runtime host does not serve Invoke")
	}
	if err := CheckTenant(stream.Context(), req.GetSnapshot()); err != nil {
		return err
	}
	return s.invoker.Invoke(stream.Context(), req, stream.Send)
}

// CheckTenant verifies that the incoming metadata's x-tenant-id (required) and, when present,
// x-org-id and x-user-id match snap. It returns an INVALID_ARGUMENT or PERMISSION_DENIED status.
func CheckTenant(ctx context.Context, snap *messages.ExecutionContextSnapshot) error {
	if snap.GetTenantId() == "" {
		return status.Error(codes.InvalidArgument, "invoke: the request has no execution context snapshot with a tenant")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	want := map[string]string{messages.MetadataTenantID: snap.GetTenantId(), messages.MetadataOrgID: snap.GetOrgId(),
		messages.MetadataUserID: snap.GetUserId()}
	for key, v := range want {
		got := md.Get(key)
		if key == messages.MetadataTenantID && len(got) == 0 {
			return status.Error(codes.PermissionDenied, "invoke: missing x-tenant-id metadata")
		}
		if len(got) > 0 && got[0] != v {
			return status.Errorf(codes.PermissionDenied, "invoke: %s metadata does not match the execution context", key)
		}
	}
	return nil
}
