// Package rcq is the "redis-command-queue" runtime instance provider and its runtime host
// consumer: runtime commands travel through one Redis stream per instance
// ("dair:runtime:{id}:commands"), consumed by the host with a consumer group.
//
// The provider appends a RuntimeCommand (protobuf) to the instance's stream with a reply key
// and a deadline, then waits on the reply key (BLPOP) for the RuntimeCommandResult, with the
// shared hardening of package remote ("redis-command-queue-..." reasons; a stream nobody
// consumes times out). The consumer (Consumer) reads its instances' streams with XREADGROUP,
// carries each command out against the instance (a dispatch puts the run into the instance's
// local queue, whose ownership the store records), pushes the answer, and only then
// acknowledges and deletes the entry. Entries a dead consumer read but never acknowledged are
// reclaimed (XAUTOCLAIM) by the next consumer of the stream; a reclaimed command past its
// deadline is acknowledged without being carried out (nobody waits for it, and the run it
// names has been retried since), and a late dispatch of a run already queued is de-duplicated
// by the instance.
//
// An instance served this way publishes provider_name and transport_name
// "redis-command-queue", its stream key as endpoint and as metadata provider.commandQueueKey.
//
// # Usage
//
//	p := rcq.New(rcq.Config{Client: rdb, Remote: remote.Config{Timeout: 2 * time.Second}})
//	res := p.Dispatch(ctx, descriptor, req)
//
//	c := rcq.NewConsumer(rcq.ConsumerConfig{Client: rdb, Backend: localProvider, Instances: node.LocalInstanceIDs,
//		Name: incarnation})
//	go c.Run(ctx)
package rcq
