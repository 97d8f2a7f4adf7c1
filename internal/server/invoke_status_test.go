package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dairuntime/dair/actors"
)

// TestSubmitStatus: one row per kind of Submit error, and the gRPC code an Invoke caller gets
// for it (the HTTP API's status in brackets).
func TestSubmitStatus(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("submit: %w", err) }
	for _, tt := range []struct {
		err  error
		want codes.Code
	}{
		{wrap(actors.ErrUnknownPipeline), codes.NotFound},           // 404
		{wrap(actors.ErrNotFound), codes.NotFound},                  // 404
		{wrap(actors.ErrBadInput), codes.InvalidArgument},           // 400
		{wrap(actors.ErrTenantSuspended), codes.FailedPrecondition}, // 423
		{wrap(actors.ErrTenantQueueFull), codes.ResourceExhausted},  // 429
		{wrap(actors.ErrNoCapacity), codes.Unavailable},             // 503
		{wrap(actors.ErrStopped), codes.Unavailable},                // 503
		{wrap(context.Canceled), codes.Internal},
		{errors.New("store down"), codes.Internal}, // 500
	} {
		t.Run(tt.err.Error(), func(t *testing.T) {
			err := submitStatus(tt.err)
			if got := status.Code(err); got != tt.want {
				t.Fatalf("code = %v, want %v", got, tt.want)
			}
			if msg := status.Convert(err).Message(); msg != tt.err.Error() {
				t.Fatalf("message = %q, want %q", msg, tt.err.Error())
			}
		})
	}
}
