package grpc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	grpcprov "github.com/dairuntime/dair/providers/grpc"
	"github.com/dairuntime/dair/providers/remote"
	"github.com/dairuntime/dair/testkit"
)

// serve starts a runtime host's gRPC services for b on a loopback port (TLS when cfg is set)
// and returns its address.
func serve(t *testing.T, b *testkit.RuntimeBackend, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpcprov.NewServer(grpcprov.ServerConfig{Backend: b, Instances: b.Instances, TLS: cfg})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}

func newProvider(t *testing.T, cfg grpcprov.Config) *grpcprov.Provider {
	p := grpcprov.New(cfg)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func descriptor(id, endpoint string) *messages.CapacityDescriptor {
	return &messages.CapacityDescriptor{RuntimeInstanceId: id, ProviderName: grpcprov.Name, TransportName: grpcprov.Name, Endpoint: endpoint}
}

func dispatchReq() *messages.DispatchRequest {
	return &messages.DispatchRequest{SharedRunId: "run-1", RuntimeInstanceId: "i-1", Snapshot: &messages.ExecutionContextSnapshot{
		TenantId: "acme", TenantGroupId: "g", OrgId: "org-7", UserId: "u-42", CorrelationId: "c-1", Roles: []string{"tenant"}}}
}

// TestProvider_Dispatch_plaintextLoopback: a dispatch over plaintext gRPC on loopback arrives
// with its snapshot byte-equal and the tenant metadata x-tenant-id, x-org-id, x-user-id.
func TestProvider_Dispatch_plaintextLoopback(t *testing.T) {
	b := testkit.NewRuntimeBackend("i-1")
	addr := serve(t, b, nil)
	p := newProvider(t, grpcprov.Config{})
	req := dispatchReq()
	res := p.Dispatch(context.Background(), descriptor("i-1", "grpc://"+addr), req)
	require.True(t, res.GetOk(), res.GetReason())
	got, mds := b.Dispatches()
	require.Len(t, got, 1)
	require.True(t, proto.Equal(req.Snapshot, got[0].Snapshot), "snapshot at the host %v, sent %v", got[0].Snapshot, req.Snapshot)
	require.Equal(t, []string{"acme"}, mds[0].Get(messages.MetadataTenantID))
	require.Equal(t, []string{"org-7"}, mds[0].Get(messages.MetadataOrgID))
	require.Equal(t, []string{"u-42"}, mds[0].Get(messages.MetadataUserID))
	qs := p.QueueStatus(context.Background(), descriptor("i-1", addr))
	require.True(t, qs.GetResult().GetOk(), qs.GetResult().GetReason())
	require.Equal(t, "i-1", qs.GetCapacity().GetRuntimeInstanceId())
}

// TestProvider_Dispatch_faults: a host that hangs is timed out, retried and exhausted with
// grpc-dispatch-timeout; an instance the host does not serve is a non-retryable refusal, not
// retried; an endpoint that keeps failing opens its circuit.
func TestProvider_Dispatch_faults(t *testing.T) {
	b := testkit.NewRuntimeBackend("i-1")
	addr := serve(t, b, nil)
	p := newProvider(t, grpcprov.Config{Remote: remote.Config{Timeout: 100 * time.Millisecond, Attempts: 3, Backoff: time.Millisecond,
		CircuitFailures: 100}})
	ctx := context.Background()

	b.SetHang(true)
	res := p.Dispatch(ctx, descriptor("i-1", addr), dispatchReq())
	require.False(t, res.GetOk())
	require.True(t, res.GetRetryable())
	require.Equal(t, "grpc-retry-exhausted: 3 attempts, last grpc-dispatch-timeout", res.GetReason())
	testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return b.Calls() == 3 }, "three attempts reached the host")
	b.SetHang(false)

	other := dispatchReq()
	other.RuntimeInstanceId = "other"
	res = p.Dispatch(ctx, descriptor("other", addr), other)
	require.False(t, res.GetOk())
	require.False(t, res.GetRetryable(), res.GetReason())
	require.Equal(t, "grpc-command-non-retryable", res.GetReason())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	q := newProvider(t, grpcprov.Config{Remote: remote.Config{Timeout: time.Second, Attempts: 1, CircuitFailures: 2, CircuitOpenFor: time.Minute}})
	for range 2 {
		res = q.Dispatch(ctx, descriptor("i-1", dead), dispatchReq())
		require.Equal(t, "grpc-provider-unavailable", res.GetReason())
	}
	res = q.Dispatch(ctx, descriptor("i-1", dead), dispatchReq())
	require.Equal(t, "grpc-circuit-open", res.GetReason())
	require.True(t, q.Caller().Open(dead))
}

// TestProvider_TLS: a host serving TLS with client certificates (grpcs://) is reached by a
// provider that presents a certificate and trusts the CA; a plaintext provider, and one that
// does not trust the CA, are refused.
func TestProvider_TLS(t *testing.T) {
	ca := testkit.NewTestCA(t, "runtime-ca")
	hostCert, cpCert := ca.Issue(t, "host"), ca.Issue(t, "cp")
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ca.CertFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pem))
	hc, err := tls.LoadX509KeyPair(hostCert.CertFile, hostCert.KeyFile)
	require.NoError(t, err)
	cc, err := tls.LoadX509KeyPair(cpCert.CertFile, cpCert.KeyFile)
	require.NoError(t, err)
	b := testkit.NewRuntimeBackend("i-1")
	addr := serve(t, b, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{hc}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert})
	ctx := context.Background()
	rc := remote.Config{Timeout: 2 * time.Second, Attempts: 1}

	p := newProvider(t, grpcprov.Config{Remote: rc, TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cc}}})
	res := p.Dispatch(ctx, descriptor("i-1", "grpcs://"+addr), dispatchReq())
	require.True(t, res.GetOk(), res.GetReason())

	plain := newProvider(t, grpcprov.Config{Remote: rc})
	res = plain.Dispatch(ctx, descriptor("i-1", "grpc://"+addr), dispatchReq())
	require.False(t, res.GetOk(), "plaintext reached a TLS host")
	untrusting := newProvider(t, grpcprov.Config{Remote: rc, TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cc}}})
	res = untrusting.Dispatch(ctx, descriptor("i-1", "grpcs://"+addr), dispatchReq())
	require.False(t, res.GetOk(), "a provider that does not trust the CA reached the host")
	got, _ := b.Dispatches()
	require.Len(t, got, 1, "only the TLS dispatch reached the host")
}

// rawCodec sends the bytes it is given as they are (a caller whose message does not decode).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestServer_undecodableRequestIsInvalidArgument: a request message that does not decode is
// the caller's fault, answered INVALID_ARGUMENT (grpc-go's own answer is INTERNAL), on a unary
// method and on the streaming Invoke; the host serves the next good request.
func TestServer_undecodableRequestIsInvalidArgument(t *testing.T) {
	b := testkit.NewRuntimeBackend("i-1")
	addr := serve(t, b, nil)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bad := []byte{0xff, 0xff, 0xff, 0xff}
	var out []byte
	err = conn.Invoke(ctx, "/runtime.v1.RuntimeInstanceService/Dispatch", &bad, &out, grpc.ForceCodec(rawCodec{}))
	require.Equal(t, codes.InvalidArgument, status.Code(err), "unary: %v", err)
	require.Contains(t, status.Convert(err).Message(), "does not decode")

	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/runtime.v1.RuntimeService/Invoke", grpc.ForceCodec(rawCodec{}))
	require.NoError(t, err)
	require.NoError(t, stream.SendMsg(&bad))
	require.NoError(t, stream.CloseSend())
	err = stream.RecvMsg(&out)
	require.Equal(t, codes.InvalidArgument, status.Code(err), "stream: %v", err)

	res := newProvider(t, grpcprov.Config{}).Dispatch(ctx, descriptor("i-1", addr), dispatchReq())
	require.True(t, res.GetOk(), res.GetReason())
}
