// Package agents is the pure routing state of dair's agent messaging (seed 003): the worker
// directory with its health accounting, placement of agents on workers, the subscription index
// and the pending-session table. The actors in package actors (agent*.go) drive it: a router on
// every node owns one Directory and one Sessions table, and publishes Directory.Table snapshots
// for the node's callers.
//
// The package has no goroutines, no clock reads (time comes in arguments) and no protoactor
// imports; every type but Table is owned by one goroutine.
//
// # Model
//
// An agent is named by messages.AgentId{type, key} and scoped by the tenant of the envelope's
// ExecutionContextSnapshot: the same id under two tenants is two agents (Key). A worker is a
// node's agent runtime; its id is the node's member id. Workers become known from cluster
// membership (the agent types in their node meta, SetMembers) and from their registrations
// (types with tenant restrictions, subscriptions, a version; Register).
//
// # Rules
//
//  1. Placement (Table.Route): the owners of a type are its routable workers (not evicted, not
//     leaving), the healthy ones when there are any. An agent goes to the owner with the highest
//     rendezvous score for (tenant, type, key), so keys of a type on several workers are sharded
//     across them, the loss of an owner moves only its keys, and a type on one worker behaves as
//     the seed's single owner. No owner: ReasonNoLiveOwner.
//  2. Tenancy: a message without snapshot tenant is refused (ReasonMissingTenant); a tenant
//     outside the chosen owner's registration of the type is refused (ReasonTenantRefused); a
//     publish only matches its own tenant's subscriptions.
//  3. Publish (Resolve): the index is matched once (exact topic type, then prefixes), each match
//     is rewritten into its concrete recipient (the subscription's key, or the topic source),
//     each recipient once, grouped by destination worker: one batch per worker.
//  4. Sessions: a send opens a session with the caller's deadline and the RPC deadline. It
//     resolves once: the worker's outcome; TIMEOUT at the deadline; UNDELIVERABLE when its worker
//     is evicted (ReasonWorkerEvicted) or the router stops. A session that timed out stays
//     TIMEOUT whatever happens next; if its worker has not answered by the RPC deadline, the
//     worker is marked unhealthy. The router is idle when no session is pending.
//  5. Health (Config: 5 s interval, threshold 2, RPC timeout 30 s): a failed probe counts a
//     failure and marks the worker unhealthy; a successful one resets both; FailureThreshold
//     consecutive failures evict it. Eviction drops its types and subscriptions; a later
//     registration re-admits it. A member that leaves the cluster is removed.
//
// # Usage
//
//	dir := agents.NewDirectory(cfg, agents.Member{ID: selfID, NodeID: nodeID})
//	dir.Register(ownRegistration)
//	dir.SetMembers(members) // on every membership change
//	table := dir.Table()    // publish to callers (immutable)
//
//	r := table.Route(tenant, id)
//	if r.Worker == nil {
//		return agents.Undeliverable(r.Reason, "")
//	}
//	sid := sessions.Open(r.Worker.ID, caller, now, deadline, cfg.RPCTimeout)
//	// ... send the delivery under sid; on its answer:
//	if res, ok := sessions.Resolve(sid, outcome); ok {
//		reply(res.Value, res.Outcome)
//	}
//	// on every tick: timeouts, unhealthy := sessions.Expire(now)
//	// on a failed probe: if dir.ProbeFailed(w) { dir.Evict(w); sessions.EvictWorker(w, "...") }
//
//	plan := agents.Resolve(dir.Index(), table, tenant, topic) // one batch per plan.Workers
package agents
