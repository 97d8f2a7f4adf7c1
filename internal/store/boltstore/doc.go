// Package boltstore is the embedded store.Store backend: one bbolt file for a single-node
// deployment.
//
// Every record is a protobuf message under a bucket per concern, with index buckets for the
// lookups the interface needs (runs by idempotency key and creation time, executions by runtime
// instance, queue items by enqueue order and claim deadline). All writes go through one owner
// goroutine that coalesces concurrent writers into a single bbolt transaction (group commit), so
// many small CommitSteps calls share one fsync. Reads use concurrent read transactions.
//
// Only one process may open a file at a time (bbolt's file lock); Open gives up after a short
// timeout with ErrLocked.
//
// # Usage
//
//	st, err := boltstore.Open(boltstore.Options{Path: "/var/lib/dair/dair.db"})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	run, created, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1"})
package boltstore
