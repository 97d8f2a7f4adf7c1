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
package testkit
