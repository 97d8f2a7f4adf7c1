package chaos

import (
	"sync"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// tracked is one acknowledged run as the harness follows it.
type tracked struct {
	id, tenant string
	ackedAt    time.Time
	status     string
	instance   string   // assigned runtime instance at the last poll
	observed   []string // distinct non-empty execution ids, in order of first sight
}

// tracker is the harness's view of the workload, shared by the submitter, the poller and the
// injector. It is safe for concurrent use.
type tracker struct {
	mu        sync.Mutex          // guards the fields below
	runs      map[string]*tracked // by run id
	order     []string            // run ids in acknowledgement order
	submitted int                 // submissions started
	gaveUp    []string            // submissions never acknowledged, with the last error
	hosts     map[string]string   // runtime instance id → node id, latest seen
}

func newTracker() *tracker {
	return &tracker{runs: map[string]*tracked{}, hosts: map[string]string{}}
}

// started counts a submission started.
func (t *tracker) started() {
	t.mu.Lock()
	t.submitted++
	t.mu.Unlock()
}

// ack records an acknowledged run (a repeat of an idempotent submit is recorded once).
func (t *tracker) ack(id, tenant string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.runs[id]; ok {
		return
	}
	t.runs[id] = &tracked{id: id, tenant: tenant, ackedAt: at}
	t.order = append(t.order, id)
}

// giveUp records a submission that was never acknowledged.
func (t *tracker) giveUp(what string) {
	t.mu.Lock()
	t.gaveUp = append(t.gaveUp, what)
	t.mu.Unlock()
}

// observe records a polled run record of a tracked run.
func (t *tracker) observe(r *httpapi.Run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, ok := t.runs[r.SharedRunID]
	if !ok {
		return
	}
	tr.status, tr.instance = r.Status, r.AssignedRuntimeInstanceID
	if r.ExecutionID != "" && (len(tr.observed) == 0 || !contains(tr.observed, r.ExecutionID)) {
		tr.observed = append(tr.observed, r.ExecutionID)
	}
}

// observeInstances records where each listed instance lives.
func (t *tracker) observeInstances(list []httpapi.Instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range list {
		if in.HostID != "" {
			t.hosts[in.RuntimeInstanceID] = in.HostID
		}
	}
}

// affected returns the runs a fault would stall now: placed (dispatched, running or paused)
// on an instance of node (any instance when node is "").
func (t *tracker) affected(node string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, id := range t.order {
		tr := t.runs[id]
		placed := tr.status == messages.RunDispatched || tr.status == messages.RunRunning || tr.status == messages.RunPaused
		if placed && (node == "" || t.hosts[tr.instance] == node) {
			out = append(out, id)
		}
	}
	return out
}

// counts is a summary of the tracked runs.
type counts struct {
	submitted, acked, gaveUp, succeeded, failed, active int
}

func (t *tracker) counts() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := counts{submitted: t.submitted, acked: len(t.order), gaveUp: len(t.gaveUp)}
	for _, tr := range t.runs {
		switch tr.status {
		case messages.RunSucceeded:
			c.succeeded++
		case messages.RunFailed, messages.RunCancelled:
			c.failed++
		default:
			c.active++
		}
	}
	return c
}

// snapshot returns copies of the tracked runs in acknowledgement order.
func (t *tracker) snapshot() []tracked {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]tracked, 0, len(t.order))
	for _, id := range t.order {
		tr := *t.runs[id]
		tr.observed = append([]string(nil), tr.observed...)
		out = append(out, tr)
	}
	return out
}

// instanceIDs returns every runtime instance id seen.
func (t *tracker) instanceIDs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sortedKeys(t.hosts)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
