package agents

import (
	"cmp"
	"slices"

	"github.com/dairuntime/dair/messages"
)

// Member is a cluster member as the directory needs it.
type Member struct {
	// ID is the member (actor system) id: the worker id.
	ID string
	// NodeID is the logical node id.
	NodeID string
	// Address is the actor address ("host:port").
	Address string
	// Types are the agent types the member advertises in its node meta.
	Types []string
}

// Worker is the directory's view of one worker. Workers returns copies.
type Worker struct {
	ID, NodeID, Address string
	// Self is this node's own worker (never probed, never evicted).
	Self bool
	// Member is set while the worker is a cluster member.
	Member bool
	// MetaTypes are the types advertised in the member's node meta.
	MetaTypes []string
	// Registration is the newest registration received; nil until one arrives.
	Registration *messages.AgentWorkerRegistration
	// Failures counts consecutive failed probes.
	Failures int
	// Unhealthy is set by a failed probe or an RPC that exceeded the RPC timeout, and cleared
	// by a successful probe. An unhealthy worker owns keys only when no owner is healthy.
	Unhealthy bool
	// Evicted is set when failures reached the threshold: the worker's types and
	// subscriptions are dropped until it registers again.
	Evicted bool
	// Leaving is set by a registration announcing an ordered shutdown: no new deliveries.
	Leaving bool
	// ActiveAgents is the number of active agents the last probe reported.
	ActiveAgents int
}

// types returns the agent types the worker owns: its meta types and registered types.
func (w *Worker) types() []string {
	out := slices.Clone(w.MetaTypes)
	for _, t := range w.Registration.GetTypes() {
		out = append(out, t.GetName())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// routable reports whether the worker may receive new deliveries.
func (w *Worker) routable() bool { return !w.Evicted && !w.Leaving }

// Directory is a router's worker directory with its health accounting and subscription index:
// rebuilt from cluster membership (SetMembers) and worker registrations (Register), changed by
// probe results. It is pure state: no goroutines, no clock, no I/O; it is not safe for
// concurrent use (the router's actor owns it). Table publishes an immutable snapshot.
type Directory struct {
	cfg     Config
	self    string
	workers map[string]*Worker
	index   *Index
}

// NewDirectory returns a directory holding only this node's own worker self (its types come
// from its registration).
func NewDirectory(cfg Config, self Member) *Directory {
	d := &Directory{cfg: cfg.WithDefaults(), self: self.ID, workers: map[string]*Worker{}, index: NewIndex()}
	d.workers[self.ID] = &Worker{ID: self.ID, NodeID: self.NodeID, Address: self.Address, Self: true, Member: true}
	return d
}

// Self returns this node's worker id.
func (d *Directory) Self() string { return d.self }

// Index returns the subscription index of the live workers. The caller must not modify it.
func (d *Directory) Index() *Index { return d.index }

// SetMembers applies the full alive member set. New members are added with their meta types,
// known ones get their meta types and address refreshed, and workers that were members but are
// missing from ms are removed, with their types and subscriptions (left lists them). A worker
// known only by its registration is kept until it shows up as a member or is evicted.
func (d *Directory) SetMembers(ms []Member) (left []string) {
	alive := make(map[string]bool, len(ms))
	for _, m := range ms {
		alive[m.ID] = true
		w := d.workers[m.ID]
		if w == nil {
			w = &Worker{ID: m.ID}
			d.workers[m.ID] = w
		}
		w.NodeID, w.Member, w.MetaTypes = m.NodeID, true, slices.Clone(m.Types)
		if !w.Self {
			w.Address = m.Address
		}
	}
	for id, w := range d.workers {
		if !w.Self && w.Member && !alive[id] {
			left = append(left, id)
			d.remove(id)
		}
	}
	slices.Sort(left)
	return left
}

// Register applies a worker's registration. A registration older than or as old as the one
// held is ignored (false), except for an evicted worker, which any registration re-admits. An
// accepted registration resets the worker's health and replaces its subscriptions.
func (d *Directory) Register(reg *messages.AgentWorkerRegistration) bool {
	w := d.workers[reg.GetWorkerId()]
	if w == nil {
		w = &Worker{ID: reg.GetWorkerId(), NodeID: reg.GetNodeId(), Address: reg.GetAddress()}
		d.workers[w.ID] = w
	}
	if w.Registration != nil && !w.Evicted && reg.GetVersion() <= w.Registration.GetVersion() {
		return false
	}
	w.Registration = reg
	w.Failures, w.Unhealthy, w.Evicted, w.Leaving = 0, false, false, reg.GetLeaving()
	if w.Leaving {
		d.index.Remove(w.ID)
	} else {
		d.index.Set(w.ID, reg.GetSubscriptions())
	}
	return true
}

// KnownVersion returns the registration version a probe of worker id should announce: 0 when
// the directory needs the worker's registration (none yet, or evicted).
func (d *Directory) KnownVersion(id string) uint64 {
	w := d.workers[id]
	if w == nil || w.Evicted {
		return 0
	}
	return w.Registration.GetVersion()
}

// ProbeTargets returns the workers to probe: every worker but this node's own, sorted.
func (d *Directory) ProbeTargets() []Worker {
	var out []Worker
	for _, w := range d.workers {
		if !w.Self {
			out = append(out, *w)
		}
	}
	slices.SortFunc(out, func(a, b Worker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ProbeSucceeded records an answered probe: failures reset, unhealthy cleared. It reports
// false when the worker is unknown.
func (d *Directory) ProbeSucceeded(id string, activeAgents int) bool {
	w := d.workers[id]
	if w == nil {
		return false
	}
	w.Failures, w.Unhealthy, w.ActiveAgents = 0, false, activeAgents
	return true
}

// ProbeFailed records a failed probe and reports whether the worker must now be evicted (its
// consecutive failures reached the threshold). The caller then calls Evict. A member that has
// neither registered nor advertised agent types is not an agent worker yet (its node is still
// starting): its failed probes do not count.
func (d *Directory) ProbeFailed(id string) (evict bool) {
	w := d.workers[id]
	if w == nil || w.Self || w.Evicted || w.Registration == nil && len(w.MetaTypes) == 0 {
		return false
	}
	w.Failures++
	w.Unhealthy = true
	return w.Failures >= d.cfg.FailureThreshold
}

// RPCTimedOut marks a worker unhealthy after a request to it exceeded the RPC timeout: its keys
// move to healthy owners until a probe succeeds. It counts as one failure.
func (d *Directory) RPCTimedOut(id string) (evict bool) { return d.ProbeFailed(id) }

// Evict drops a worker's types and subscriptions; it stays known while it is a member, so a
// later registration can re-admit it, and is removed otherwise. It reports false for this
// node's own worker, an unknown worker, or one already evicted.
func (d *Directory) Evict(id string) bool {
	w := d.workers[id]
	if w == nil || w.Self || w.Evicted {
		return false
	}
	w.Evicted = true
	d.index.Remove(id)
	if !w.Member {
		d.remove(id)
	}
	return true
}

func (d *Directory) remove(id string) {
	delete(d.workers, id)
	d.index.Remove(id)
}

// Worker returns a copy of worker id.
func (d *Directory) Worker(id string) (Worker, bool) {
	w := d.workers[id]
	if w == nil {
		return Worker{}, false
	}
	return *w, true
}

// Workers returns copies of every worker, sorted by id. The caller owns the slice.
func (d *Directory) Workers() []Worker {
	out := make([]Worker, 0, len(d.workers))
	for _, w := range d.workers {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b Worker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Table builds the routing snapshot: for each type, its owners among the routable workers
// (neither evicted nor leaving), healthy ones only when the type has any.
func (d *Directory) Table() *Table {
	t := &Table{self: d.self, owners: map[string][]owner{}, workers: map[string]*WorkerRoute{}}
	sick := map[string][]owner{}
	ids := make([]string, 0, len(d.workers))
	for id := range d.workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := d.workers[id]
		if !w.routable() {
			continue
		}
		r := &WorkerRoute{ID: w.ID, NodeID: w.NodeID, Address: w.Address, Self: w.Self}
		if w.Registration != nil {
			r.tenants = map[string][]string{}
			for _, at := range w.Registration.Types {
				r.tenants[at.Name] = at.Tenants
			}
		}
		t.workers[id] = r
		o := owner{id: id, seed: strHash(fnvOffset, id)}
		for _, typ := range w.types() {
			if w.Unhealthy {
				sick[typ] = append(sick[typ], o)
			} else {
				t.owners[typ] = append(t.owners[typ], o)
			}
		}
	}
	for typ, os := range sick {
		if len(t.owners[typ]) == 0 {
			t.owners[typ] = os
		}
	}
	return t
}
