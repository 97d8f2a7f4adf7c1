// Package testkit is dair's test harness: launchers for real dependencies (a redis-server on a
// free loopback port that tests can kill and restart), and, as they are added, probes, a cluster
// harness and a fake clock. It is an exported package so dair's users can test their own
// pipelines and providers the same way dair tests itself.
//
// Every launcher registers its cleanup with t.Cleanup, so a test never leaks a process.
//
// # Usage
//
//	func TestSomething(t *testing.T) {
//		testkit.RequireRedis(t)
//		r := testkit.StartRedis(t, testkit.RedisOptions{AOF: true, AppendFsync: "always"})
//		client := redis.NewClient(&redis.Options{Addr: r.Addr()})
//		// ... use Redis; r.Kill() and r.Restart() inject faults.
//	}
//
// A cluster of `dair node` processes on that Redis. The binary is built once per test binary,
// in TestMain, with BuildBinary (a module of your own lists it as a tool: see BuildBinary and
// examples/testkit-module). Each node's Client is the public HTTP client (package client)
// speaking the wire types of package httpapi:
//
//	bin, err := testkit.BuildBinary(ctx, dir) // in TestMain
//	pc := testkit.StartProcessCluster(t, testkit.ProcessClusterOptions{Binary: bin, N: 3, RedisURL: r.URL()})
//	pc.WaitTopology(3)
//	sub, err := pc.Node(0).Client().Submit(ctx, httpapi.SubmitRequest{Pipeline: "three", TenantID: "acme"})
//	n := pc.Node(1)
//	n.Kill()      // kill -9; n.Restart() brings it back on the same addresses
//	n.Stop()      // SIGSTOP; n.Cont() resumes it
//	n.Partition() // cut off its membership transport; n.Heal() restores it
//	ledgers, err := pc.Ledgers(ctx, runID) // each reachable node's view of a run's ledger
package testkit
