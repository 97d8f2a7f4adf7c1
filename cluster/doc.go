// Package cluster is dair's node membership: hashicorp/memberlist gossip fed into
// protoactor-go's cluster topology, protoactor's gRPC remote for messages between nodes, and
// membership events (joined, left, updated, self declared dead) that drive recovery.
//
// # Usage
//
//	sys := actor.NewActorSystem()
//	m, err := cluster.Start(ctx, sys, cluster.Config{
//		NodeID:   "node-1",
//		BindAddr: "10.0.0.5:7946",
//		Join:     []string{"10.0.0.4:7946"},
//		Roles:    []string{"control-plane", "runtime"},
//	})
//	if err != nil { ... }
//	defer m.Shutdown(true)
//	events, cancel := m.Subscribe(64)
//	defer cancel()
//	for ev := range events {
//		switch ev.Kind {
//		case cluster.MemberLeft:       // recover ev.Member.NodeID's executions
//		case cluster.SelfDeclaredDead: // stop runtime work, restart under a new actor system
//		}
//	}
//	// Messages go to PIDs by address: actor.NewPID(member.Address, "name").
//
// # Design
//
// The memberlist node name is the actor system id; the node meta (JSON, at most 512 bytes)
// carries the logical node id, the remote host and port, roles and kinds. One goroutine owns
// the member set: on every memberlist event and on a timer it rebuilds the de-duplicated alive
// set, emits events and feeds protoactor's MemberList.UpdateClusterTopology. A member id that
// left is never admitted again — protoactor blocks it forever too — so a restarted process must
// create a new actor system (new id); its logical NodeID may stay the same.
//
// protoactor's Cluster.StartMember is not used (it creates its own remote, panics on errors and
// sleeps; its Shutdown stops the actor system): Start starts the remote first, then wires
// protoactor's cluster object with no kinds and the disthash identity lookup, then the Provider.
// protoactor's cluster gossip and pub/sub are not started; dair uses no grains.
//
// # Failure detection
//
// Measured on a 2-core machine, 3 in-process nodes on loopback, time from a node stopping
// without a leave until peers emit MemberLeft:
//
//	ProfileLocal: 1.7–1.8 s (memberlist ~1.2 s: probe 250 ms, timeout 100 ms, suspicion ×3;
//	              plus the 500 ms leave grace)
//	ProfileLAN:   8.3 s     (memberlist.DefaultLANConfig ~6 s, plus the 2 s leave grace)
//	graceful Shutdown(true): ~0.2 s with ProfileLocal (the node announces "leaving" in its meta,
//	              then leaves; peers skip the grace)
//
// The leave grace keeps a member that vanished from memberlist in the view briefly: after a
// partition heals, the isolated node's queued "dead" broadcasts can mark healthy nodes dead
// until they refute (seen in tests), which must not trigger recovery. An isolated node detects
// its peers' loss more slowly (3–4 s with ProfileLocal): memberlist's local-health awareness
// stretches its timeouts while all its probes fail.
//
// # Partitions and SelfDeclaredDead
//
// memberlist never rejoins on its own, so the Provider retries Join towards seeds while alone
// and towards departed addresses for a while. When a departed id shows up alive again (a
// healed partition), each side sends it a notice carrying the sender's view size. The receiver
// emits SelfDeclaredDead if the sender never saw it leave, or if its own view is smaller (on a
// tie, the side whose smallest member id is larger loses). Measured: the isolated node of 3
// learns it within ~1 s of the heal with ProfileLocal; the majority is unaffected. On
// SelfDeclaredDead the engine must stop its runtime instances (their executions were fenced and
// moved), call Shutdown and restart the actor system under a new id.
//
// # Security
//
// Config.Keyring encrypts gossip. protoactor's remote is insecure unless Config.RemoteTLS is
// set; use mutual TLS (client certificates), because a node receiving an unknown message type
// crashes: the remote port must only be reachable by trusted nodes running the same message
// registry (importing github.com/dairuntime/dair/messages registers dair's types).
//
// # Messaging cost
//
// BenchmarkClusterMessages (two in-process systems, loopback, 2 cores): about 1.35M one-way
// *messages.Ping/s; request/response RTT p50 53 µs, p99 153 µs.
//
// # Testing
//
// FaultTransport wraps memberlist's NetTransport (NewLoopbackTransport) and can Partition and
// Heal a node. Several protoactor remotes in one process race on grpc's global logger under
// -race (Remote.Start writes it), so multi-remote tests run peers as child processes.
package cluster
