package agents

import (
	"slices"

	"github.com/dairuntime/dair/messages"
)

// WorkerRoute is what a routing Table knows about one worker. It is read-only.
type WorkerRoute struct {
	// ID is the worker id: the member (actor system) id of its node, or the node's own id
	// without a cluster.
	ID string
	// NodeID is the logical node id; the worker's actors are named after it.
	NodeID string
	// Address is the worker's actor address ("host:port"), empty for this node's own worker.
	Address string
	// Self is set for this node's own worker.
	Self bool
	// tenants maps each registered type to its tenant restriction (nil: every tenant). A nil
	// map means the worker's registration is not known yet: the worker checks tenancy itself.
	tenants map[string][]string
}

// Allows reports whether the worker's registration of typ accepts tenant. Before the
// registration is known it reports true; the worker checks again on delivery.
func (w *WorkerRoute) Allows(typ, tenant string) bool {
	if w.tenants == nil {
		return true
	}
	return TenantAllowed(w.tenants[typ], tenant)
}

// Table is an immutable routing snapshot (Directory.Table): the live owners of every agent type
// and the workers they run on. Nothing mutates a Table once built, so any number of goroutines
// may use it.
type Table struct {
	self    string
	owners  map[string][]owner // type -> owners sorted by id
	workers map[string]*WorkerRoute
}

// owner is one owner of a type with its precomputed rendezvous seed.
type owner struct {
	id   string
	seed uint64
}

// Route is where the messages of one agent go.
type Route struct {
	// Worker is the destination; nil when the agent is unreachable.
	Worker *WorkerRoute
	// Reason says why the agent is unreachable ("<code>: <detail>"); empty when routable.
	Reason string
}

// Route places agent id of tenant: on the owner with the highest rendezvous score among the
// type's live owners (keys of a type owned by several workers are sharded across them; when one
// is lost only its keys move). It refuses a missing tenant (ReasonMissingTenant), a type without
// a live owner (ReasonNoLiveOwner) and a tenant the owner's registration excludes
// (ReasonTenantRefused).
func (t *Table) Route(tenant string, id *messages.AgentId) Route {
	if tenant == "" {
		return Route{Reason: Reason(ReasonMissingTenant, "the message has no snapshot tenant")}
	}
	os := t.owners[id.GetType()]
	if len(os) == 0 {
		return Route{Reason: Reason(ReasonNoLiveOwner, "no live worker owns agent type %q", id.GetType())}
	}
	w := t.workers[pick(os, agentHash(tenant, id.GetType(), id.GetKey()))]
	if !w.Allows(id.GetType(), tenant) {
		return Route{Reason: Reason(ReasonTenantRefused, "tenant %q may not reach agents of type %q", tenant, id.GetType())}
	}
	return Route{Worker: w}
}

// Owners returns the ids of the live owners of typ, sorted. The caller owns the slice.
func (t *Table) Owners(typ string) []string {
	out := make([]string, 0, len(t.owners[typ]))
	for _, o := range t.owners[typ] {
		out = append(out, o.id)
	}
	return out
}

// Types returns the agent types that have a live owner, sorted. The caller owns the slice.
func (t *Table) Types() []string {
	out := make([]string, 0, len(t.owners))
	for typ := range t.owners {
		out = append(out, typ)
	}
	slices.Sort(out)
	return out
}

// Worker returns the route of worker id, or nil.
func (t *Table) Worker(id string) *WorkerRoute { return t.workers[id] }

// Self returns this node's worker id.
func (t *Table) Self() string { return t.self }

// Rendezvous returns the owner among owners that rendezvous hashing picks for agent (tenant,
// typ, key), or "" when owners is empty. Every node computes the same answer from the same
// owner set, whatever its order.
func Rendezvous(owners []string, tenant, typ, key string) string {
	if len(owners) == 0 {
		return ""
	}
	os := make([]owner, len(owners))
	for i, id := range owners {
		os[i] = owner{id: id, seed: strHash(fnvOffset, id)}
	}
	return pick(os, agentHash(tenant, typ, key))
}

// pick returns the id of the owner with the highest score (ties: the smaller id).
func pick(os []owner, h uint64) string {
	best, bestScore := "", uint64(0)
	for i, o := range os {
		s := mix(o.seed ^ h)
		if i == 0 || s > bestScore || s == bestScore && o.id < best {
			best, bestScore = o.id, s
		}
	}
	return best
}

// FNV-1a over the tenant, type and key separated by zero bytes, finished with a 64-bit mixer:
// deterministic across processes (unlike hash/maphash) and allocation-free.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func agentHash(tenant, typ, key string) uint64 {
	h := strHash(fnvOffset, tenant)
	h = (h ^ 0) * fnvPrime
	h = strHash(h, typ)
	h = (h ^ 0) * fnvPrime
	return strHash(h, key)
}

func strHash(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// mix is splitmix64's finalizer: it spreads FNV's weak low bits over the whole word.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
