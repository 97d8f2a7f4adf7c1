package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/step"
)

// stepTask is the child actor that runs one attempt of one step. It runs the handler on
// Started, reports a stepDone to its parent and stops itself. A handler panic is recovered and
// reported as a failed attempt, so it fails only that attempt.
//
// The context is owned by the parent execution, which cancels it on timeout, cancel, pause of
// in-flight work, restart and stop; the handler must return when it is done.
type stepTask struct {
	ctx     context.Context
	handler step.Handler
	req     *step.Request
	inc     int
}

func (t *stepTask) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); !ok {
		return
	}
	start := time.Now()
	out, err := runHandler(t.ctx, t.handler, t.req)
	c.Send(c.Parent(), &stepDone{
		inc:       t.inc,
		stepID:    t.req.StepID,
		attempt:   t.req.Attempt,
		output:    out.raw,
		usage:     out.usage,
		err:       err,
		permanent: err != nil && step.IsPermanent(err),
		dur:       time.Since(start),
	})
	c.Stop(c.Self())
}

type handlerOutput struct {
	raw   []byte
	usage step.Usage
}

// runHandler calls h, converting a panic into an error and the output into JSON.
func runHandler(ctx context.Context, h step.Handler, req *step.Request) (out handlerOutput, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("step %s: handler panicked: %v\n%s", req.StepID, r, debug.Stack())
		}
	}()
	res, err := h.Run(ctx, req)
	if err != nil {
		return out, err
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("step %s: %w", req.StepID, ctx.Err())
	}
	raw, err := json.Marshal(res.Output)
	if err != nil {
		return out, step.Permanent(fmt.Errorf("step %s: output is not JSON: %w", req.StepID, err))
	}
	return handlerOutput{raw: raw, usage: res.Usage}, nil
}
