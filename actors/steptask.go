package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dairuntime/dair/internal/step"
)

// runStepTask runs one attempt of one step (the execution's "step task", started through the
// node's worker group) and reports a stepDone to the execution. A handler panic is recovered
// and reported as a failed attempt, so it fails only that attempt; an attempt that ends after
// its deadline is reported as timed out. The task always reports, exactly once.
//
// A task is a goroutine rather than a child actor: a sleeping step then costs one small stack
// and no mailbox, which is what lets a node hold 100k in-flight executions. ctx belongs to the
// execution, which cancels it on timeout, cancel, restart and stop; the handler must return
// when it is done.
func runStepTask(ctx context.Context, sys *actor.ActorSystem, parent *actor.PID, h step.Handler, req *step.Request, inc int) {
	start := time.Now()
	out, err := runHandler(ctx, h, req)
	sys.Root.Send(parent, &stepDone{
		inc:       inc,
		stepID:    req.StepID,
		attempt:   req.Attempt,
		output:    out.raw,
		usage:     out.usage,
		err:       err,
		permanent: err != nil && step.IsPermanent(err),
		timedOut:  err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded),
		dur:       time.Since(start),
	})
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
	if len(raw) > step.MaxOutputBytes {
		return out, step.Permanent(fmt.Errorf("step %s: output of %d bytes exceeds the limit of %d bytes", req.StepID, len(raw),
			step.MaxOutputBytes))
	}
	return handlerOutput{raw: raw, usage: res.Usage}, nil
}
