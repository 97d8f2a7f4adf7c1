package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/messages"
	grpcprov "github.com/dairuntime/dair/providers/grpc"
)

// invokePoll is how often an invocation re-reads the run's ledger without a local notification.
const invokePoll = 200 * time.Millisecond

// nodeInvoker serves seed 001's RuntimeService.Invoke on a runtime host: it submits the
// session's run under the caller's snapshot (admission then places it on the tenant's
// capacity) and streams the run's ledger entries until the terminal one.
type nodeInvoker struct{ node func() *actors.Node }

var _ grpcprov.Invoker = (*nodeInvoker)(nil)

// Invoke submits req and sends the run's events. It blocks until the run ends or ctx ends.
func (v *nodeInvoker) Invoke(ctx context.Context, req *messages.InvokeRequest, send func(*messages.InvokeEvent) error) error {
	n := v.node()
	if n == nil {
		return status.Error(codes.Unavailable, "invoke: the runtime host is starting")
	}
	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: req.GetPipeline(), Input: req.GetInput(), Snapshot: req.GetSnapshot(),
		CorrelationID: req.GetCorrelationId(), IdempotencyKey: req.GetIdempotencyKey(), SessionID: req.GetSessionId()})
	if err != nil {
		return submitStatus(err)
	}
	changed, cancel := n.Hub().Subscribe(run.SharedRunId)
	defer cancel()
	poll := time.NewTicker(invokePoll)
	defer poll.Stop()
	var after int64
	for {
		entries, err := n.Store().ReadLedger(ctx, run.SharedRunId, after, 0)
		if err != nil {
			return status.Errorf(codes.Unavailable, "invoke: read ledger: %v", err)
		}
		for _, e := range entries {
			if err := send(&messages.InvokeEvent{SharedRunId: run.SharedRunId, Entry: e}); err != nil {
				return fmt.Errorf("invoke: send event: %w", err)
			}
			after = e.Seq
			if e.Kind == messages.KindRunSucceeded || e.Kind == messages.KindRunFailed || e.Kind == messages.KindRunCancelled {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-changed:
		case <-poll.C:
		}
	}
}

// submitStatus maps a Submit error to a gRPC status.
func submitStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, actors.ErrUnknownPipeline), errors.Is(err, actors.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, actors.ErrBadInput):
		code = codes.InvalidArgument
	case errors.Is(err, actors.ErrTenantSuspended):
		code = codes.FailedPrecondition
	case errors.Is(err, actors.ErrTenantQueueFull):
		code = codes.ResourceExhausted // HTTP's 429: the caller backs off and retries
	case errors.Is(err, actors.ErrNoCapacity), errors.Is(err, actors.ErrStopped):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}
