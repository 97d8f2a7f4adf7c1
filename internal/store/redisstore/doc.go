// Package redisstore is the Redis backend of store.Store, the one dair uses in clusters.
//
// Records are protobuf-encoded values under keys namespaced by Options.Prefix. Every
// multi-key atomic operation (queue claim and ack, slot reservation, step commit with its
// epoch check and ledger append, execution acquire, leases) is one Lua script, so the
// invariants hold across any number of processes. Read-modify-write updates (UpdateRun,
// UpdateScaleOut, UpdateExecution) are optimistic: read, apply fn in Go, and write back with a
// compare-and-set script on the record's version, retrying on conflict. CommitSteps pipelines
// one EVALSHA per commit in a single round trip.
//
// Expiry (registry heartbeats, queue visibility, reservations, leases) is decided by comparing
// deadlines stored as sorted-set scores or hash fields (Unix microseconds) with the injected
// clock, never by Redis key TTLs, so tests can drive time.
//
// When Redis is unreachable every call fails promptly with a wrapped error; the client
// reconnects on its own once Redis is back, and scripts are reloaded on NOSCRIPT.
//
// # Usage
//
//	st, err := redisstore.Open(ctx, redisstore.Options{URL: "redis://127.0.0.1:6379/0"})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	run, created, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1"})
package redisstore
