// Package localqueue is a runtime instance's local run queue (seed 000: "local runtime queues
// own RunId"): it admits dispatched runs to the queue (or refuses them: paused, draining,
// full), starts them in arrival order within the instance's run slots and worker budget,
// splits the workers among executions, answers run-control lookups, and fills in the capacity
// figures the instance publishes.
//
// It is pure: no I/O, no goroutines, no clock. A Queue is not goroutine-safe; one owner (the
// runtime instance actor) calls it from its Receive.
//
// # Usage
//
//	q := localqueue.New(localqueue.Limits{Workers: 4, MaxConcurrent: 2, QueueCapacity: 10})
//	lr, reason := q.Offer(req, func() string { return ids.New("lrun") })
//	for _, r := range q.Start() {
//		spawn(r.LocalRunID, r.Req, r.Workers)
//	}
//	q.Finish(lr) // the execution ended: its slot and workers are free again
package localqueue

import (
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Reasons Offer refuses a run (ProviderResult.Reason of the dispatch).
const (
	ReasonDraining = "instance-draining"
	ReasonPaused   = "queue-paused"
	ReasonFull     = "queue-full"
)

// Limits are an instance's capacity settings.
type Limits struct {
	// Workers is the instance's worker count (WorkerCountPerInstance).
	Workers int
	// MaxConcurrent is the number of run slots (MaxConcurrentRunsPerInstance).
	MaxConcurrent int
	// QueueCapacity bounds the runs waiting for a slot (LocalQueueCapacity).
	QueueCapacity int
	// MaxLocal caps the workers of one execution (MaxLocalWorkersPerExecution). Zero, or a
	// value of at least Workers, splits the workers among the run slots so that every slot can
	// start (a local policy, per the seed).
	MaxLocal int
}

// Run is one run of the queue.
type Run struct {
	LocalRunID string
	Req        *messages.DispatchRequest
	// Workers is the run's worker budget, set when it starts.
	Workers int
}

// Queue is the local queue and worker budget of one instance.
type Queue struct {
	lim      Limits
	queue    []*Run
	running  map[string]*Run   // by local run id
	byShared map[string]string // shared run id -> local run id, queued or running
	active   int               // workers of running runs
	paused   bool
	draining bool
}

// New returns an empty queue with limits l.
func New(l Limits) *Queue {
	if l.MaxLocal <= 0 || l.MaxLocal >= l.Workers {
		l.MaxLocal = max(1, l.Workers/max(1, l.MaxConcurrent))
	}
	return &Queue{lim: l, running: map[string]*Run{}, byShared: map[string]string{}}
}

// Limits returns the queue's limits (MaxLocal resolved).
func (q *Queue) Limits() Limits { return q.lim }

// Offer queues req under a new local run id from newID and returns that id, or the id the
// run already has here (a repeated dispatch), or "" and the reason it refuses the run.
func (q *Queue) Offer(req *messages.DispatchRequest, newID func() string) (localRunID, reason string) {
	if lr, ok := q.byShared[req.SharedRunId]; ok {
		return lr, ""
	}
	switch {
	case q.draining:
		return "", ReasonDraining
	case q.paused:
		return "", ReasonPaused
	}
	canStart := len(q.queue) == 0 && len(q.running) < q.lim.MaxConcurrent && q.lim.Workers-q.active > 0
	if !canStart && len(q.queue) >= q.lim.QueueCapacity {
		return "", ReasonFull
	}
	lr := newID()
	q.queue = append(q.queue, &Run{LocalRunID: lr, Req: req})
	q.byShared[req.SharedRunId] = lr
	return lr, ""
}

// Start moves the runs that can start now from the queue to running, in arrival order, and
// returns them with their worker budgets: while the queue is not paused, a run slot is free
// and workers are available. A run gets at most MaxLocal workers, and never more than its
// pipeline's widest level (Req.MaxParallelism) can use.
func (q *Queue) Start() []*Run {
	var started []*Run
	for !q.paused && len(q.queue) > 0 && len(q.running) < q.lim.MaxConcurrent {
		avail := q.lim.Workers - q.active
		if avail <= 0 {
			break
		}
		r := q.queue[0]
		q.queue = q.queue[1:]
		perExec := q.lim.MaxLocal
		if p := int(r.Req.MaxParallelism); p > 0 && p < perExec {
			perExec = p
		}
		r.Workers = tenancy.EffectiveWorkers(q.lim.Workers, perExec, avail)
		q.active += r.Workers
		q.running[r.LocalRunID] = r
		started = append(started, r)
	}
	return started
}

// Finish frees the slot and workers of a running run and returns it; false when lr is not
// running (already finished, or unknown).
func (q *Queue) Finish(lr string) (*Run, bool) {
	r, ok := q.running[lr]
	if !ok {
		return nil, false
	}
	delete(q.running, lr)
	delete(q.byShared, r.Req.SharedRunId)
	q.active -= r.Workers
	return r, true
}

// Unqueue removes a run that has not started and returns it; false when lr is not queued.
func (q *Queue) Unqueue(lr string) (*Run, bool) {
	for i, r := range q.queue {
		if r.LocalRunID == lr {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			delete(q.byShared, r.Req.SharedRunId)
			return r, true
		}
	}
	return nil, false
}

// Find resolves a run-control target: localRunID when given, else the local run id of
// sharedRunID (queued or running here).
func (q *Queue) Find(localRunID, sharedRunID string) (string, bool) {
	if localRunID != "" {
		return localRunID, true
	}
	lr, ok := q.byShared[sharedRunID]
	return lr, ok
}

// IsRunning reports whether lr is running.
func (q *Queue) IsRunning(lr string) bool {
	_, ok := q.running[lr]
	return ok
}

// IsQueued reports whether lr waits in the queue.
func (q *Queue) IsQueued(lr string) bool {
	for _, r := range q.queue {
		if r.LocalRunID == lr {
			return true
		}
	}
	return false
}

// Status returns the shared run id and status (running or queued) of lr.
func (q *Queue) Status(lr string) (sharedRunID, status string, ok bool) {
	if r := q.running[lr]; r != nil {
		return r.Req.SharedRunId, messages.RunRunning, true
	}
	for _, r := range q.queue {
		if r.LocalRunID == lr {
			return r.Req.SharedRunId, messages.RunQueued, true
		}
	}
	return "", "", false
}

// Pause stops starting queued runs and refuses new ones.
func (q *Queue) Pause() { q.paused = true }

// Resume returns a paused or draining queue to service.
func (q *Queue) Resume() { q.paused, q.draining = false, false }

// Drain refuses new runs; queued and running ones go on.
func (q *Queue) Drain() { q.draining = true }

// Undrain accepts new runs again.
func (q *Queue) Undrain() { q.draining = false }

// QueuedIDs returns the local run ids waiting, in order. The caller owns the slice.
func (q *Queue) QueuedIDs() []string {
	out := make([]string, 0, len(q.queue))
	for _, r := range q.queue {
		out = append(out, r.LocalRunID)
	}
	return out
}

// RunningIDs returns the local run ids running, in no particular order. The caller owns the
// slice.
func (q *Queue) RunningIDs() []string {
	out := make([]string, 0, len(q.running))
	for lr := range q.running {
		out = append(out, lr)
	}
	return out
}

// Holds returns the shared run ids the instance holds a slot reservation for: running, then
// queued. The caller owns the slice.
func (q *Queue) Holds() []string {
	out := make([]string, 0, len(q.running)+len(q.queue))
	for _, r := range q.running {
		out = append(out, r.Req.SharedRunId)
	}
	for _, r := range q.queue {
		out = append(out, r.Req.SharedRunId)
	}
	return out
}

// Fill sets the capacity fields of d (status ready or draining, counts, flags and whether the
// instance can accept a run) from the queue.
func (q *Queue) Fill(d *messages.CapacityDescriptor) {
	slots := max(0, q.lim.MaxConcurrent-len(q.running))
	avail := max(0, q.lim.Workers-q.active)
	d.Status = messages.InstanceReady
	if q.draining {
		d.Status = messages.InstanceDraining
	}
	d.WorkerCount, d.ActiveWorkerCount, d.AvailableWorkerCount = int32(q.lim.Workers), int32(q.active), int32(avail)
	d.MaxLocalWorkersPerExecution = int32(q.lim.MaxLocal)
	d.QueuedRunCount, d.RunningRunCount = int32(len(q.queue)), int32(len(q.running))
	d.ActiveRunCount = int32(len(q.queue) + len(q.running))
	d.QueueCapacity, d.MaxConcurrentRuns, d.AvailableRunSlots = int32(q.lim.QueueCapacity), int32(q.lim.MaxConcurrent), int32(slots)
	d.IsQueuePaused, d.IsDraining = q.paused, q.draining
	d.CanAcceptRun = !q.paused && !q.draining && len(q.queue) < q.lim.QueueCapacity && slots > 0 && avail > 0
}
