package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/messages"
	grpcprov "github.com/dairuntime/dair/providers/grpc"
)

// InvokeRouteHeader is the response header of POST /v1/sessions/{session_id}/invoke that says
// where the invocation ran: "grpc/<runtime_instance_id>" when it went through that runtime
// host's runtime.v1.RuntimeService.Invoke, InvokeRouteLocal when this node submitted the run.
const InvokeRouteHeader = "X-Dair-Invoke-Route"

// InvokeRouteLocal is InvokeRouteHeader's value for an invocation this node submitted itself.
const InvokeRouteLocal = "local"

// remoteInvoker is the capability of a provider that reaches seed 001's RuntimeService.Invoke
// on a runtime host (the grpc provider). Invoke sends the snapshot's tenant metadata and
// returns the host's event stream; it does not block past opening the stream.
type remoteInvoker interface {
	Invoke(ctx context.Context, d *messages.CapacityDescriptor, req *messages.InvokeRequest) (grpc.ServerStreamingClient[messages.InvokeEvent], error)
}

// invokeTarget returns the tenant's ready gRPC runtime instance with the most free run slots
// and the provider that reaches it, or nil when the tenant has none (or no provider serves
// Invoke).
func (s *server) invokeTarget(ctx context.Context, tenantID string) (*messages.CapacityDescriptor, remoteInvoker) {
	p, ok := s.node.Providers().Lookup(grpcprov.Name)
	if !ok {
		return nil, nil
	}
	inv, ok := p.(remoteInvoker)
	if !ok {
		return nil, nil
	}
	list, err := s.node.Store().ListInstances(ctx)
	if err != nil {
		return nil, nil
	}
	var best *messages.CapacityDescriptor
	for _, d := range list {
		if d.GetTenantId() != tenantID || d.GetProviderName() != grpcprov.Name || d.GetStatus() != messages.InstanceReady ||
			!d.GetCanAcceptRun() || d.GetEndpoint() == "" {
			continue
		}
		if best == nil || d.GetAvailableRunSlots() > best.GetAvailableRunSlots() {
			best = d
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, inv
}

// invokeRemote runs a prepared invocation through the tenant's gRPC runtime host and relays its
// events as the SSE stream. It reports false, having written nothing, when the tenant has no
// such host or the host could not be reached before the run started: the caller then submits
// locally (sub then carries an idempotency key, so a run the host did create is not created
// twice). A refusal by the host is answered here with the matching HTTP error.
func (s *server) invokeRemote(w http.ResponseWriter, r *http.Request, sub *actors.SubmitRequest, after int64) bool {
	d, inv := s.invokeTarget(r.Context(), sub.Snapshot.GetTenantId())
	if d == nil {
		return false
	}
	if sub.IdempotencyKey == "" {
		sub.IdempotencyKey = ids.New("invoke")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := inv.Invoke(ctx, d, &messages.InvokeRequest{SessionId: sub.SessionID, Pipeline: sub.Pipeline, Input: sub.Input,
		Snapshot: sub.Snapshot, CorrelationId: sub.CorrelationID, IdempotencyKey: sub.IdempotencyKey})
	var first *messages.InvokeEvent
	if err == nil {
		first, err = stream.Recv()
	}
	if err != nil {
		if fallback(err) {
			s.log.Warn("api: invoke through the runtime host failed; submitting here", zap.String("runtime_instance_id", d.GetRuntimeInstanceId()),
				zap.Error(err))
			return false
		}
		s.fail(w, r, invokeError(err))
		return true
	}
	w.Header().Set(InvokeRouteHeader, grpcprov.Name+"/"+d.GetRuntimeInstanceId())
	s.relay(w, r, stream, first, after)
	return true
}

// fallback reports whether a failed Invoke (before any event) leaves the run to this node: the
// host was unreachable, timed out, or is stopping.
func fallback(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown, codes.Internal, codes.Canceled:
		return true
	}
	return errors.Is(err, io.EOF)
}

// invokeError maps the host's refusal to the API's error.
func invokeError(err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.NotFound:
		return &httpError{status: http.StatusNotFound, code: httpapi.CodeUnknownPipeline, msg: "api: " + st.Message()}
	case codes.InvalidArgument:
		return badRequest("api: %s", st.Message())
	case codes.PermissionDenied:
		return forbidden("api: %s", st.Message())
	case codes.FailedPrecondition:
		return &httpError{status: http.StatusLocked, code: httpapi.CodeTenantSuspended, msg: "api: " + st.Message()}
	case codes.ResourceExhausted:
		// The host's tenant queue is full: the same 429 (and Retry-After) as a local submit's.
		return &hostRefusal{msg: st.Message(), is: actors.ErrTenantQueueFull}
	}
	return fmt.Errorf("api: invoke through the runtime host: %s", st.Message())
}

// hostRefusal is a runtime host's refusal of an invocation, worded by the host, that the API
// answers as it answers the same refusal of a local submit (errors.Is(err, is)).
type hostRefusal struct {
	msg string
	is  error
}

func (e *hostRefusal) Error() string { return e.msg }
func (e *hostRefusal) Unwrap() error { return e.is }

// relay writes the SSE stream of a remote invocation: first, then every event the host sends,
// skipping those at or before after (a resumed stream), until the terminal one, the end of
// the host's stream, or the client leaving. Comments keep an idle stream alive.
func (s *server) relay(w http.ResponseWriter, r *http.Request, stream grpc.ServerStreamingClient[messages.InvokeEvent],
	first *messages.InvokeEvent, after int64) {
	flush, ok := s.openStream(w, r)
	if !ok {
		return
	}
	events := make(chan *messages.InvokeEvent, 16)
	go func() {
		defer close(events)
		for ev := first; ev != nil; {
			select {
			case events <- ev:
			case <-r.Context().Done():
				return
			}
			var err error
			if ev, err = stream.Recv(); err != nil {
				if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
					s.log.Warn("api: invoke stream from the runtime host ended", zap.Error(err))
				}
				return
			}
		}
	}()
	heartbeat := time.NewTicker(s.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || !flush() {
				return
			}
		case ev, open := <-events:
			if !open {
				return
			}
			e := ev.GetEntry()
			if e == nil || e.GetSeq() <= after {
				continue
			}
			if writeEvent(w, e) != nil || !flush() || ledger.IsTerminalKind(e.GetKind()) {
				return
			}
		}
	}
}
