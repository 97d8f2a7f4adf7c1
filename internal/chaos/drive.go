package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dairuntime/dair/client"
)

// submitRetry is the pause between attempts of a submission that was not acknowledged.
const submitRetry = 250 * time.Millisecond

// submit submits Config.Runs runs spread over the first 80% of the fault window, each from
// its own goroutine, and returns when every submission was acknowledged or given up.
func (h *harness) submit(ctx context.Context, start time.Time) {
	spread := h.cfg.Duration * 8 / 10
	deadline := start.Add(h.cfg.Duration + h.cfg.FinishTimeout/2)
	done := make(chan struct{}, h.cfg.Runs)
	launched := 0
	for i := range h.cfg.Runs {
		due := start.Add(spread * time.Duration(i) / time.Duration(h.cfg.Runs))
		if !sleepUntil(ctx, due) {
			break
		}
		h.track.started()
		launched++
		go func() {
			defer func() { done <- struct{}{} }()
			h.submitOne(ctx, i, deadline)
		}()
	}
	for range launched {
		<-done
	}
}

// submitOne submits run i to reachable nodes in turn until it is acknowledged, the answer is
// a definitive refusal, or deadline passes. Its idempotency key makes retries safe.
func (h *harness) submitOne(ctx context.Context, i int, deadline time.Time) {
	req := h.work.submitRequest(i)
	var last error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := h.client().Submit(cctx, req)
		cancel()
		if err == nil {
			h.track.ack(res.SharedRunID, req.TenantID, time.Now())
			return
		}
		last = err
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 && ce.Status != http.StatusTooManyRequests &&
			ce.Status != http.StatusLocked {
			break // the harness sent something wrong: retrying cannot help
		}
		if !sleepUntil(ctx, time.Now().Add(submitRetry)) {
			break
		}
	}
	h.track.giveUp(fmt.Sprintf("run %d (%s): %v", i, req.TenantID, last))
}

// poll refreshes the tracker every second (run records of every tenant, instance placement)
// and prints a summary line every Config.ProgressEvery, until ctx ends.
func (h *harness) poll(ctx context.Context, start time.Time) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	lastSummary := time.Now()
	for {
		h.refresh(ctx)
		if time.Since(lastSummary) >= h.cfg.ProgressEvery {
			lastSummary = time.Now()
			h.summary(start)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refresh reads every tenant's runs and the instance list from a reachable node into the
// tracker. Failures (a node or Redis down) leave the previous view.
func (h *harness) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c := h.client()
	if list, err := c.ListInstances(ctx, ""); err == nil {
		h.track.observeInstances(list.Instances)
	}
	for _, tenant := range h.work.tenantIDs() {
		list, err := c.ListRuns(ctx, tenant, "")
		if err != nil {
			continue
		}
		for i := range list.Runs {
			h.track.observe(&list.Runs[i])
		}
	}
}

// summary prints one progress line.
func (h *harness) summary(start time.Time) {
	c := h.track.counts()
	h.out.printf("chaos: +%-5s submitted %d/%d, acknowledged %d, succeeded %d, failed %d, in flight %d",
		time.Since(start).Round(time.Second), c.submitted, h.cfg.Runs, c.acked, c.succeeded, c.failed, c.active)
}

// finish brings back every node and Redis should a fault's undo have failed, then waits until
// every acknowledged run is final or Config.FinishTimeout passes. The error says what did not
// happen in time; the properties judge the rest.
func (h *harness) finish(ctx context.Context) error {
	h.out.printf("chaos: fault window over; waiting up to %s for the runs to finish", h.cfg.FinishTimeout)
	var errs []error
	if h.redis != nil && !h.redis.Running() {
		rctx, cancel := context.WithTimeout(ctx, restartTimeout)
		errs = append(errs, h.redis.Restart(rctx))
		cancel()
	}
	for _, n := range h.cluster.Nodes() {
		if n.Reachable() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, restartTimeout)
		errs = append(errs, h.revive(rctx, n))
		cancel()
	}
	wctx, cancel := context.WithTimeout(ctx, h.cfg.FinishTimeout)
	defer cancel()
	for {
		c := h.track.counts()
		if c.active == 0 && c.submitted == c.acked+c.gaveUp && c.submitted == h.cfg.Runs {
			return errors.Join(errs...)
		}
		if !sleepUntil(wctx, time.Now().Add(pollEvery)) {
			return errors.Join(append(errs, fmt.Errorf("%d runs still in flight after %s", c.active, h.cfg.FinishTimeout))...)
		}
	}
}

// sleepUntil waits until t and reports true, or false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
